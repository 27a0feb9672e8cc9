"""``report.html`` of a comparison: one self-contained page (inline SVG, no script).

Every bench's name leads to its own report and viewer, every per-task cell to the
episodes it counts (their pages in that bench's viewer), so "solved here, failed there"
is one click from the two traces that say why.
"""

from __future__ import annotations

import html

from linewise.apps.bench.report_html import CSS
from linewise.apps.bench.svg import PALETTE, Point, scatter
from linewise.apps.compare.data import Comparison, TaskRow, cell_text, pair_line
from linewise.apps.compare.tables import (
    BENCH_HEADER,
    NOTES,
    bench_opening,
    bench_rows,
    task_header,
    title,
)

COMPARE_CSS = """
td.solved { background: #e6f4ea; } td.failed { background: #fce8e6; }
td.mixed { background: #fef7e0; } td.diff, td.cell { text-align: left; }
#differing th, #per-task th { text-align: left; }
td.cell a { margin-left: 0.3rem; font-size: 0.8rem; }
a.ok { color: #137333; } a.bad { color: #c5221f; } a.aside { color: #666; }
.bench-state { margin: 0.4rem 0; }
#rounds td:nth-child(2), #rounds th:nth-child(2) { text-align: left; }
"""

Links = dict[tuple[str, str], str]
"""The viewer page of each episode, by (bench label, episode folder), relative to the
comparison's report."""


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _table(header: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _benches(comparison: Comparison, bench_links: dict[str, str]) -> str:
    """Each bench's state (as its report opens), then the table of every arm."""
    states = []
    for row in comparison.benches:
        base = bench_links.get(row.label)
        name = (f'<a href="{_esc(base)}/report.html">{_esc(row.label)}</a> '
                f'(<a href="{_esc(base)}/view/index.html">episodes</a>)'
                if base is not None else _esc(row.label))
        lines = " ".join(
            _esc(line.text) + (f' <code class="resume">{_esc(line.command)}</code>'
                               if line.command else "") + _esc(line.after)
            for line in bench_opening(row))
        kind = "complete" if row.state.complete else "incomplete"
        states.append(f'<div class="state bench-state {kind}" data-bench="{_esc(row.label)}">'
                      f"<p><b>{name}</b> <code>{_esc(row.path)}</code></p><p>{lines}</p></div>")
    rows = "".join(
        "<tr>" + "".join(f"<td>{_esc(cell)}</td>" for cell in cells) + "</tr>"
        for row in comparison.benches for cells in bench_rows(row))
    return "".join(states) + _table(BENCH_HEADER, [rows])


def _plot(comparison: Comparison) -> str:
    points = [
        Point(x=a.metrics.action_tokens_per_episode + a.metrics.retriever_tokens_per_episode,
              y=100 * a.metrics.success_rate, y_err=100 * (a.metrics.success_se or 0.0),
              label=a.arm.id, color=PALETTE[i % len(PALETTE)])
        for i, a in enumerate(arm for row in comparison.benches for arm in row.arms)
        if a.metrics.success_rate is not None
    ]
    return scatter("success-vs-tokens", points, title="Success rate vs tokens per episode",
                   x_label="model tokens per agent outcome", y_label="success rate (%) ± SE",
                   x_range=(0, max([1.0, *(p.x for p in points)])), y_range=(0, 100))


def _task_row(comparison: Comparison, row: TaskRow, links: Links) -> str:
    cells = [f"<td>{_esc(row.task)}</td>"]
    for arm in comparison.arms:
        cell = row.cells.get(arm.id)
        if cell is None:
            cells.append('<td class="cell absent">-</td>')
            continue
        episodes = "".join(
            f'<a class="{"ok" if ref.success else "aside" if ref.outcome != "agent" else "bad"}"'
            f' href="{_esc(href)}" title="{_esc(ref.outcome)}">seed {ref.seed}</a>'
            for ref in cell.refs
            if (href := links.get((arm.bench, ref.episode_dir))) is not None)
        verdict = cell.verdict.replace(" ", "-")
        cells.append(f'<td class="cell {verdict}" data-arm="{_esc(arm.id)}">'
                     f"{_esc(cell_text(cell))}{episodes}</td>")
    cells.append(f'<td class="diff">{_esc(row.diff or "")}</td>')
    return f'<tr data-task="{_esc(row.task)}">' + "".join(cells) + "</tr>"


def render_html(comparison: Comparison, bench_links: dict[str, str], links: Links,
                index: str | None = None, *, heading: str | None = None,
                opening: str = "") -> str:
    """``bench_links``: each bench's folder relative to the report (by label); ``links``:
    each episode's page; ``index``: the viewer index over every bench, if written;
    ``heading`` and ``opening`` (HTML before the benches) for a study of its own: an
    improve folder's rounds."""
    name = heading or title(comparison)
    notes = "".join(f'<p class="muted">{_esc(note)}</p>' for note in NOTES)
    if index is not None:
        notes += (f'<p class="muted">Every episode of every bench, step by step: '
                  f'<a href="{_esc(index)}">the trace viewer</a>.</p>')
    pairs = "".join(f"<li>{_esc(pair_line(pair))}</li>" for pair in comparison.pairs)
    differing = comparison.differing
    header = task_header(comparison)
    differ = (_table(header, [_task_row(comparison, row, links) for row in differing])
              if differing else '<p id="no-difference">No task was solved at different '
              "rates by the benches that judged it.</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{_esc(name)}</title>
<style>{CSS}{COMPARE_CSS}</style></head>
<body>
<h1>{_esc(name)}</h1>
<p class="muted">{len(comparison.benches)} benches, {len(comparison.arms)} agent and filter
arms, {len(comparison.tasks)} tasks. Generated {_esc(comparison.generated_at)}.</p>
{opening}
<h2 id="benches">Benches</h2>
{_benches(comparison, bench_links)}
{notes}
<div class="plots"><figure>{_plot(comparison)}</figure></div>
<h2 id="differ">Where they differ</h2>
<ul id="pairs">{pairs}</ul>
<div id="differing">{differ}</div>
<h2 id="tasks">Per task</h2>
<div id="per-task">{_table(header, [_task_row(comparison, row, links)
                                    for row in comparison.tasks])}</div>
</body></html>
"""
