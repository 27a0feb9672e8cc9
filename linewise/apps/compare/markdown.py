"""``report.md`` of a comparison: the benches side by side as Markdown tables."""

from __future__ import annotations

from linewise.apps.bench.report_markdown import md_table
from linewise.apps.compare.data import Comparison, pair_line
from linewise.apps.compare.tables import (
    BENCH_HEADER,
    NOTES,
    bench_opening,
    bench_rows,
    task_cells,
    task_header,
    title,
)


def render_markdown(comparison: Comparison, *, heading: str | None = None,
                    opening: list[str] | None = None) -> str:
    """``heading`` and ``opening`` (lines before the benches) for a study of its own:
    an improve folder's rounds."""
    out = [f"# {heading or title(comparison)}", "",
           f"{len(comparison.benches)} benches, {len(comparison.arms)} agent and filter "
           f"arms, {len(comparison.tasks)} tasks. Generated {comparison.generated_at}.", ""]
    out += opening or []
    out += ["## Benches", ""]
    for row in comparison.benches:
        lines = [line.text + (f" `{line.command}`" if line.command else "") + line.after
                 for line in bench_opening(row)]
        if not row.state.complete:  # part of a bench must not read as the whole of it
            lines[0] = f"**{lines[0]}**"
        out += [f"- **{row.label}** (`{row.path}`): " + " ".join(lines)]
    out += ["", md_table(BENCH_HEADER, [cells for row in comparison.benches
                                        for cells in bench_rows(row)]), ""]
    out += [line for note in NOTES for line in (note, "")]
    differing = comparison.differing
    out += ["## Where they differ", ""]
    out += [f"- {pair_line(pair)}" for pair in comparison.pairs]
    if comparison.pairs:
        out.append("")
    if differing:
        out += [md_table(task_header(comparison),
                         [task_cells(comparison, row) for row in differing]), ""]
    else:
        out += ["No task was solved at different rates by the benches that judged it.", ""]
    out += ["## Per task", "",
            md_table(task_header(comparison),
                     [task_cells(comparison, row) for row in comparison.tasks]), ""]
    return "\n".join(out)
