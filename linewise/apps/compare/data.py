"""The comparison's numbers: per bench, per agent and filter within it, per task, and
where the benches differ ("solved here, failed there").

Every number is the benches' own reports': each episode once, as its last attempt
ended; success ± SE over the agent outcomes a task could judge; infrastructure endings,
assisted, budget and stopped endings and replays beside it, never in it
(``bench.metrics``). A column of the per-task table is an *arm*: a bench's agent and
filter (a bench run with two filters is two arms).
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.apps.bench.metrics import GroupMetrics, grouped, summarize
from linewise.apps.bench.results import EpisodeResult
from linewise.apps.bench.state import BenchState
from linewise.apps.compare.benches import Bench

Verdict = Literal["solved", "failed", "mixed", "not judged"]

MAX_PAIRS_ARMS = 6
"""Arms up to which every pair gets its line (6 arms: 15 lines); more would bury them."""


class Arm(BaseModel):
    """A column of the per-task table: one bench's agent and filter."""

    id: str = Field(description="What the tables call it: the bench's label, with the "
                    "filter (and agent) when the bench has more than one.")
    bench: str
    agent: str
    filter: str


class ArmRow(BaseModel):
    arm: Arm
    planned: int | None = Field(description="Episodes of the bench's plan under this "
                                "filter (None: the plan is unknown).")
    ran: int
    left: int | None
    metrics: GroupMetrics


class BenchRow(BaseModel):
    label: str
    path: str
    state: BenchState
    total: GroupMetrics = Field(description="Every episode of the bench as one group.")
    arms: list[ArmRow]


class EpisodeRef(BaseModel):
    """An episode of a task cell, for a link to its page in the bench's viewer."""

    seed: int
    episode_dir: str
    outcome: str
    success: bool | None


class TaskCell(BaseModel):
    """One task in one arm: its episodes (each seed once)."""

    episodes: int
    judged: int
    successes: int
    not_judged: dict[str, int] = Field(default_factory=dict, description="Endings that "
                                       "are not the agent's, by outcome.")
    refs: list[EpisodeRef] = Field(default_factory=list)

    @property
    def rate(self) -> float | None:
        return self.successes / self.judged if self.judged else None

    @property
    def verdict(self) -> Verdict:
        if not self.judged:
            return "not judged"
        if self.successes == self.judged:
            return "solved"
        return "failed" if self.successes == 0 else "mixed"


class TaskRow(BaseModel):
    task: str
    cells: dict[str, TaskCell] = Field(description="By arm id; an arm that did not run "
                                       "the task has none.")
    diff: str | None = Field(description="Where the arms that judged the task disagree "
                             "(None: they agree, or fewer than two judged it).")


class PairRow(BaseModel):
    """Two arms, task by task, over the tasks both judged."""

    a: str
    b: str
    better_a: list[str] = Field(description="Tasks ``a`` solved more often.")
    better_b: list[str]
    same: int
    judged_both: int


class Comparison(BaseModel):
    generated_at: str
    prices: Prices
    max_rounds: float | None
    benches: list[BenchRow]
    arms: list[Arm]
    tasks: list[TaskRow]
    pairs: list[PairRow] = Field(description="Every pair of arms (none past "
                                 f"{MAX_PAIRS_ARMS} arms).")

    @property
    def differing(self) -> list[TaskRow]:
        return [row for row in self.tasks if row.diff is not None]


def _arm_id(bench: Bench, agent: str, filter_name: str, agents: int, filters: int) -> str:
    parts = [bench.label, *([agent] if agents > 1 else []),
             *([filter_name] if filters > 1 else [])]
    return " · ".join(parts)


def _bench_row(bench: Bench, prices: Prices, max_rounds: float | None) -> BenchRow:
    agents = len({r.agent for r in bench.results})
    filters = len({r.filter for r in bench.results} | {k.filter for k in bench.plan or ()})
    rows = []
    for g in grouped(bench.results, lambda r: (r.agent, r.filter), ("agent", "filter"),
                     prices, max_rounds):
        agent, name = g.label["agent"], g.label["filter"]
        arm = Arm(id=_arm_id(bench, agent, name, agents, filters), bench=bench.label,
                  agent=agent, filter=name)
        mine = [r for r in bench.results if r.agent == agent and r.filter == name]
        planned = bench.planned(name)
        if planned is None and agents == filters == 1:
            planned = bench.state.planned  # a plan known by its size alone: all this arm's
        ran = sum(1 for r in mine if bench.plan is None or r.key in bench.plan)
        rows.append(ArmRow(arm=arm, planned=planned, ran=ran,
                           left=None if planned is None else max(0, planned - ran),
                           metrics=g.model_copy(update={"label": {"bench": bench.label,
                                                                  **g.label}})))
    total = summarize(bench.results, {"bench": bench.label}, prices, max_rounds)
    return BenchRow(label=bench.label, path=str(bench.path), state=bench.state,
                    total=total, arms=rows)


def task_cell(results: list[EpisodeResult]) -> TaskCell:
    agent = [r for r in results if r.outcome == "agent" and r.success is not None]
    not_judged: dict[str, int] = {}
    for r in results:
        if r.outcome != "agent":
            not_judged[r.outcome] = not_judged.get(r.outcome, 0) + 1
        elif r.success is None:
            not_judged["no success check"] = not_judged.get("no success check", 0) + 1
    return TaskCell(
        episodes=len(results), judged=len(agent), successes=sum(bool(r.success) for r in agent),
        not_judged=dict(sorted(not_judged.items())),
        refs=[EpisodeRef(seed=r.seed, episode_dir=r.episode_dir, outcome=r.outcome,
                         success=r.success) for r in sorted(results, key=lambda r: r.seed)])


def cell_text(cell: TaskCell | None) -> str:
    """``solved 2/2``, ``failed 0/2``, ``1/2``, ``not judged: infrastructure 1``; ``-``:
    the arm did not run the task."""
    if cell is None:
        return "-"
    aside = ", ".join(f"{kind} {count}" for kind, count in cell.not_judged.items())
    if cell.verdict == "not judged":
        return f"not judged: {aside}" if aside else "not judged"
    words = {"solved": "solved ", "failed": "failed ", "mixed": ""}[cell.verdict]
    return f"{words}{cell.successes}/{cell.judged}" + (f" (+{aside})" if aside else "")


def diff_text(cells: dict[str, TaskCell]) -> str | None:
    """``solved in A; failed in B`` over the arms that judged the task, or None when
    they agree (the same rate) or fewer than two judged it."""
    judged = {arm: cell for arm, cell in cells.items() if cell.judged}
    if len(judged) < 2 or len({cell.rate for cell in judged.values()}) == 1:
        return None
    parts = []
    for verdict in ("solved", "mixed", "failed"):
        arms = [arm for arm, cell in judged.items() if cell.verdict == verdict]
        if not arms:
            continue
        if verdict == "mixed":
            parts.append("partly in " + ", ".join(
                f"{arm} ({judged[arm].successes}/{judged[arm].judged})" for arm in arms))
        else:
            parts.append(f"{verdict} in " + ", ".join(arms))
    return "; ".join(parts)


def _pairs(arms: list[Arm], tasks: list[TaskRow]) -> list[PairRow]:
    if len(arms) > MAX_PAIRS_ARMS:
        return []
    pairs = []
    for a, b in itertools.combinations([arm.id for arm in arms], 2):
        both = [(row.task, row.cells[a], row.cells[b]) for row in tasks
                if a in row.cells and b in row.cells
                and row.cells[a].judged and row.cells[b].judged]
        better_a = [task for task, x, y in both if (x.rate or 0) > (y.rate or 0)]
        better_b = [task for task, x, y in both if (y.rate or 0) > (x.rate or 0)]
        pairs.append(PairRow(a=a, b=b, better_a=better_a, better_b=better_b,
                             same=len(both) - len(better_a) - len(better_b),
                             judged_both=len(both)))
    return pairs


def build_comparison(benches: list[Bench], prices: Prices,
                     max_rounds: float | None = None) -> Comparison:
    rows = [_bench_row(bench, prices, max_rounds) for bench in benches]
    arms = [arm_row.arm for row in rows for arm_row in row.arms]
    by_task: dict[str, dict[str, list[EpisodeResult]]] = {}
    for bench, row in zip(benches, rows, strict=True):
        ids = {(a.arm.agent, a.arm.filter): a.arm.id for a in row.arms}
        for r in bench.results:
            by_task.setdefault(r.base_task, {}).setdefault(ids[r.agent, r.filter], []).append(r)
    tasks = []
    for task, per_arm in sorted(by_task.items()):
        cells = {arm.id: task_cell(per_arm[arm.id]) for arm in arms if arm.id in per_arm}
        tasks.append(TaskRow(task=task, cells=cells, diff=diff_text(cells)))
    return Comparison(generated_at=datetime.now().isoformat(timespec="seconds"),
                      prices=prices, max_rounds=max_rounds, benches=rows, arms=arms,
                      tasks=tasks, pairs=_pairs(arms, tasks))


def pair_line(pair: PairRow) -> str:
    """``A against B: 3 tasks solved more often in A, 1 in B, 12 alike (16 judged by
    both)``."""
    def tasks(n: int) -> str:
        return f"{n} task{'' if n == 1 else 's'}"

    return (f"{pair.a} against {pair.b}: {tasks(len(pair.better_a))} solved more often "
            f"in {pair.a}, {len(pair.better_b)} in {pair.b}, {pair.same} alike "
            f"({tasks(pair.judged_both)} judged by both).")

