"""``report.html``: the report's tables and three plots in one self-contained file.

Plots (inline SVG, no scripts, no external files):

- success rate (± SE) against the mean tokens cut, one point per agent/filter;
- token distributions per episode, action model and retriever, per filter;
- the tokens cut per step against the original tree's size, binned (LineRetriever's Figure 3).

The plots are of the agent's outcomes, the episodes the tables' means are over: an
infrastructure ending's 0 tokens would stretch a box to 0, a replay's view is not the
agent's. Each box says how many episodes it holds.
"""

from __future__ import annotations

import html
import itertools
import math

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
from linewise.apps.bench.results import EpisodeResult
from linewise.apps.bench.svg import PALETTE, Box, Point, box_plot, scatter

CSS = """
body { font-family: -apple-system, system-ui, sans-serif; margin: 2rem; color: #222; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.plots { display: flex; flex-wrap: wrap; gap: 1rem; }
.plots figure { margin: 0; border: 1px solid #ddd; padding: 0.5rem; }
.muted { color: #666; font-size: 0.9rem; }
.state { border: 1px solid #9c9; background: #f2fbf2; padding: 0.5rem 0.8rem; }
.state.incomplete { border-color: #d9a; background: #fdf1f3; }
.state p { margin: 0.25rem 0; } .state p:first-child { font-weight: bold; }
.state code { background: #fff; padding: 0 0.2rem; user-select: all; }
"""


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def filter_colors(results: list[EpisodeResult]) -> dict[str, str]:
    names = sorted({r.filter for r in results})
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def success_vs_reduction(report: Report, colors: dict[str, str]) -> str:
    several_agents = len({g.label["agent"] for g in report.overall}) > 1
    points = [
        Point(
            x=100 * (g.reduction or 0.0),
            y=100 * g.success_rate,
            y_err=100 * (g.success_se or 0.0),
            label=(f"{g.label['agent']}/" if several_agents else "") + g.label["filter"],
            color=colors.get(g.label["filter"], PALETTE[0]),
        )
        for g in report.overall
        if g.success_rate is not None
    ]
    return scatter(
        "success-vs-reduction", points, title="Success rate vs tokens cut",
        x_label="mean tokens cut (%)", y_label="success rate (%) ± SE",
        x_range=(0, 100), y_range=(0, 100),
    )


def token_distributions(results: list[EpisodeResult], colors: dict[str, str]) -> str:
    """Per filter, the tokens of each agent outcome (``results``), its n under each box."""
    categories = []
    for title, attr in (("action model", "action_tokens"), ("retriever", "retriever_tokens")):
        boxes = [
            Box(name, [float(getattr(r, attr)) for r in results if r.filter == name], color)
            for name, color in colors.items()
        ]
        categories.append((title, boxes))
    return box_plot("token-distributions", categories, title="Tokens per agent outcome",
                    x_label="model", y_label="tokens per episode", counts=True)


def size_bins(sizes: list[int]) -> list[tuple[int, int]]:
    """Power-of-two bins covering the sizes (at most eight, merged from the top)."""
    if not sizes:
        return []
    low = max(1, min(sizes))
    start = 2 ** math.floor(math.log2(low))
    edges = [start]
    while edges[-1] <= max(sizes):
        edges.append(edges[-1] * 2)
    while len(edges) > 9:
        edges = edges[:1] + edges[2:]
    return list(itertools.pairwise(edges))


def _size_label(low: int, high: int) -> str:
    def short(v: int) -> str:
        return f"{v // 1000}k" if v >= 1000 else str(v)

    return f"{short(low)}–{short(high)}"


def reduction_vs_size(results: list[EpisodeResult], colors: dict[str, str]) -> str:
    """Box plot of per-step tokens cut by original tree size (tokens), per filter.

    Every filter that ran has its boxes, those that cut nothing on these pages too (a
    box at 0 says ``auto`` showed the whole tree); ``none``, which shows the whole tree
    by definition, is left out unless nothing else ran.
    """
    steps = [
        (r.filter, full, cut)
        for r in results for (full, _shown), cut in zip(r.step_obs_tokens, _cuts(r),
                                                        strict=False) if full > 0
    ]
    shown_filters = [n for n in colors if n != "none"] or list(colors)
    categories = []
    for low, high in size_bins([full for _, full, _ in steps]):
        boxes = [
            Box(name, [100 * red for f, full, red in steps
                       if f == name and low <= full < high], colors[name])
            for name in shown_filters
        ]
        if any(b.values for b in boxes):
            categories.append((_size_label(low, high), boxes))
    return box_plot("reduction-vs-size", categories,
                    title="Tokens cut vs original tree size (per step)",
                    x_label="original AXTree tokens", y_label="tokens cut (%)",
                    y_range=(0, 100))


def _cuts(result: EpisodeResult) -> list[float]:
    """Each step's cut: recorded (``step_reductions``), or for results written before it
    was, 1 - shown/full."""
    if result.step_reductions:
        return result.step_reductions
    return [max(0.0, 1 - shown / full) if full > 0 else 0.0
            for full, shown in result.step_obs_tokens]


def _episode_links(g_label: dict[str, str], results: list[EpisodeResult],
                   pages: dict[str, str]) -> str:
    """Links to the viewer pages of a per-task row's episodes, one per seed."""
    links = [
        f'<a href="{html.escape(pages[r.episode_dir], quote=True)}">seed {r.seed}</a>'
        for r in sorted(results, key=lambda r: r.seed)
        if (r.base_task, r.filter, r.agent) == (g_label["task"], g_label["filter"],
                                                 g_label["agent"])
        and r.episode_dir in pages
    ]
    return " ".join(links) or "-"


def _task_table(report: Report, results: list[EpisodeResult], pages: dict[str, str],
                replays: bool = False, others: bool = False) -> str:
    """The per-task table, each row linking to its episodes in the trace viewer."""
    head = "".join(f"<th>{html.escape(h)}</th>"
                   for h in [*task_header(replays, others), "episodes"])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>"
                         for cell in task_columns(g, replays, others))
        + f'<td class="episodes">{_episode_links(g.label, results, pages)}</td></tr>'
        for g in report.by_task
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _state(report: Report) -> str:
    """The bench's state, first on the page: complete, or what is left, why it
    stopped and the command that carries on (its own element, easy to copy)."""
    lines = "".join(
        f"<p>{html.escape(line.text)}"
        + (f' <code class="resume">{html.escape(line.command)}</code>' if line.command else "")
        + f"{html.escape(line.after)}</p>"
        for line in opening(report))
    kind = "complete" if report.state.complete else "incomplete"
    return f'<div id="state" class="state {kind}">{lines}</div>'


def render_html(report: Report, results: list[EpisodeResult],
                episode_pages: dict[str, str] | None = None) -> str:
    """``episode_pages``: each episode folder's viewer page, relative to the report; the
    per-task rows link to them (and the page to the viewer's index) when given. The
    plots are of the agent's outcomes, as the tables' means are."""
    replays = has_replays(report)
    others = has_other_endings(report)
    header = group_header(replays, others)
    agent_results = [r for r in results if r.outcome == "agent"]
    colors = filter_colors(agent_results or results)
    intro = "".join(f'<p class="muted">{html.escape(line)}</p>' for line in preamble(report))
    if episode_pages is not None:
        intro += ('<p class="muted">Every episode, step by step: '
                  '<a href="view/index.html">the trace viewer</a>.</p>')
    head = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Bench report: {html.escape(report.bench)}</title>
<style>{CSS}</style></head>
<body>
<h1>Bench report: {html.escape(report.bench)}</h1>
{_state(report)}
{intro}
"""
    if not report.episodes:
        return f'{head}<p id="no-results">{html.escape(NO_RESULTS)}</p>\n</body></html>\n'
    plots = [
        success_vs_reduction(report, colors),
        token_distributions(agent_results, colors),
        reduction_vs_size(agent_results, colors),
    ]
    overall = _table(["agent", "filter", *header],
                     [[g.label["agent"], g.label["filter"], *group_columns(g, replays, others)]
                      for g in report.overall])
    replay_section = ""
    if replays:
        notes = "".join(f'<p class="muted">{html.escape(line)}</p>'
                        for line in replays_notes(report))
        replay_section = (f'<h2 id="replays">Replays</h2>\n{notes}\n'
                          f'{_table(REPLAYS_HEADER, replays_rows(report))}\n')
    by_benchmark = _table(["benchmark", "agent", "filter", *header],
                          [[g.label["benchmark"], g.label["agent"], g.label["filter"],
                            *group_columns(g, replays, others)] for g in report.by_benchmark])
    if episode_pages is None:
        by_task = _table(task_header(replays, others),
                         [task_columns(g, replays, others) for g in report.by_task])
    else:
        by_task = _task_table(report, results, episode_pages, replays, others)
    figures = "".join(f"<figure>{svg}</figure>" for svg in plots)
    return f"""{head}<h2>Agents and filters</h2>
{overall}
<div class="plots">{figures}</div>
{replay_section}<h2>Per benchmark</h2>
{by_benchmark}
<h2>Per task</h2>
{by_task}
</body></html>
"""
