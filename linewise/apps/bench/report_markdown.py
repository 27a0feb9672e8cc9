"""``report.md``: the bench report as Markdown tables."""

from __future__ import annotations

from linewise.apps.bench.report_data import (
    NO_RESULTS,
    REPLAYS_HEADER,
    Report,
    group_columns,
    group_header,
    has_other_endings,
    has_replays,
    opening,
    preamble,
    replays_notes,
    replays_rows,
    task_columns,
    task_header,
)


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in rows]
    return "\n".join(lines)


def _state(report: Report) -> list[str]:
    """The bench's state, its first line in bold unless the bench is complete: a
    report of part of a bench must not read as the whole of it."""
    lines = [line.text + (f" `{line.command}`" if line.command else "") + line.after
             for line in opening(report)]
    if not report.state.complete:
        lines[0] = f"**{lines[0]}**"
    return lines


def render_markdown(report: Report) -> str:
    replays = has_replays(report)
    others = has_other_endings(report)
    header = group_header(replays, others)
    out = [f"# Bench report: {report.bench}", ""]
    out += [line for part in _state(report) for line in (part, "")]
    out += [*preamble(report), ""]
    if not report.episodes:
        return "\n".join([*out, NO_RESULTS, ""])
    out += ["## Agents and filters", "",
            md_table(["agent", "filter", *header],
                      [[g.label["agent"], g.label["filter"],
                        *group_columns(g, replays, others)] for g in report.overall]), ""]
    if replays:
        out += ["## Replays", "", *replays_notes(report), "",
                md_table(REPLAYS_HEADER, replays_rows(report)), ""]
    out += ["## Per benchmark", "",
            md_table(["benchmark", "agent", "filter", *header],
                      [[g.label["benchmark"], g.label["agent"], g.label["filter"],
                        *group_columns(g, replays, others)] for g in report.by_benchmark]),
            ""]
    out += ["## Per task", "", md_table(task_header(replays, others),
                                         [task_columns(g, replays, others)
                                          for g in report.by_task]), ""]
    return "\n".join(out)
