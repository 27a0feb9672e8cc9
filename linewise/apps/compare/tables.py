"""The comparison's tables as cells, shared by its Markdown and HTML renderings."""

from __future__ import annotations

from linewise.apps.bench.metrics import GroupMetrics
from linewise.apps.bench.report_data import (
    AGENT_N,
    errors_text,
    infra_text,
    steps_text,
    success_text,
    tokens,
)
from linewise.apps.bench.state import StateLine, state_lines
from linewise.apps.compare.data import BenchRow, Comparison, TaskRow, cell_text

BENCH_HEADER = ["bench", "agent", "filter", "planned", "ran", "left", AGENT_N,
                "success % ± SE", "infra endings", "assisted", "errors", "steps",
                "tokens/episode", "cost/episode", "wall s/episode"]
ALL_FILTERS = "(all)"
"""The filter cell of a bench's total row, under its rows per filter."""

NOTES = [
    "Each bench as its own report counts it: each episode once, as its last attempt "
    "ended. Planned, ran and left are of the bench's plan (bench.json); a bench from "
    "before plans were recorded has no planned count.",
    "Success rate ± SE over the agent outcomes each task could judge (n beside it); "
    "infrastructure endings, episodes a person assisted, budget and stopped endings and "
    "replays are counted beside it, never in it. Steps, tokens, cost and wall time are "
    "means over the row's agent outcomes (n).",
    "Per task: successes over the agent outcomes judged, every seed of the task in that "
    "bench (seeds may differ between benches); '-': the bench did not run the task. A "
    "task differs when the benches that judged it solved it at different rates.",
]


def _metric_cells(g: GroupMetrics) -> list[str]:
    means = [steps_text(g)]
    if g.agent_episodes:
        means += [tokens(g.action_tokens_per_episode + g.retriever_tokens_per_episode),
                  f"${g.cost_per_episode:.4f}", f"{g.wall_s:.1f}"]
    else:  # a 0 would read as a cost or a time the agent had
        means += ["-", "-", "-"]
    return [str(g.agent_episodes), success_text(g), infra_text(g), str(g.assisted),
            errors_text(g), *means]


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def bench_rows(row: BenchRow) -> list[list[str]]:
    """A bench's rows: one per agent and filter, then its total when it has several."""
    rows = [[row.label, a.arm.agent, a.arm.filter, _count(a.planned), str(a.ran),
             _count(a.left), *_metric_cells(a.metrics)] for a in row.arms]
    if len(row.arms) != 1:
        state = row.state
        agents = sorted({a.arm.agent for a in row.arms})
        rows.append([row.label, ", ".join(agents) or "-", ALL_FILTERS,
                     _count(state.planned), str(state.ran),
                     _count(None if state.planned is None else state.left),
                     *_metric_cells(row.total)])
    return rows


def bench_opening(row: BenchRow) -> list[StateLine]:
    """The bench's state as its own report opens with it."""
    return state_lines(row.state, row.total.episodes)


def task_header(comparison: Comparison) -> list[str]:
    return ["task", *(arm.id for arm in comparison.arms), "difference"]


def task_cells(comparison: Comparison, row: TaskRow) -> list[str]:
    return [row.task, *(cell_text(row.cells.get(arm.id)) for arm in comparison.arms),
            row.diff or ""]


def title(comparison: Comparison) -> str:
    return "Comparison: " + ", ".join(b.label for b in comparison.benches)
