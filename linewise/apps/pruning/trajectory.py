"""Trajectories from recorded traces: what the agent saw, thought and did, step by step.

A trajectory is the paper's τ = (o0, r1, a1, o1, …, rT, aT) for a browser episode: the
goal is I0, and each step carries the page the agent was shown (the possibly filtered
AXTree, with its URL and the error of the previous action), its thought and its action.
Note the browser's order: the observation of step k is what the agent saw *before* its
k-th action, i.e. the result of action k-1 (the start page for k = 0).

Run folders are searched recursively for episode folders (``summary.json`` next to
``steps.jsonl``), so both ``linewise run`` and ``linewise bench`` outputs work, and one
RUN_DIR may hold many runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from pydantic import BaseModel, Field

from linewise.agent.page_view import page_key
from linewise.errors import ConfigError
from linewise.records import HUMAN_OPERATORS, Operator, Tab
from linewise.runtime.trace import read_steps_checked, read_summary, safe_name

log = structlog.get_logger(__name__)

SKIPPED_FOLDERS = frozenset({"_incomplete", "screenshots"})
"""Never searched: the bench's set-aside partial episodes, and screenshot folders."""


class TrajectoryStep(BaseModel):
    """One round: the page as the agent saw it, then its thought and action."""

    index: int = Field(description="The step's index in the episode (0-based).")
    url: str
    tabs: list[Tab] = Field(default_factory=list)
    focused_bid: str = ""
    observation: str = Field(description="The AXTree text shown to the agent.")
    last_action_error: str | None = None
    think: str | None = None
    action: str | None = Field(default=None, description="The action, canonical if it parsed.")
    action_error: str | None = None
    operator: Operator | None = Field(
        default=None, description="A person's approval at the step-through prompt, if any."
    )
    page_key: str = Field(default="", description="The page the step acted on, whole "
                          "(``agent.page_view.page_key``): equal keys, the same page.")


class Trajectory(BaseModel):
    """One episode, ready for graph construction."""

    run: str = Field(description="The RUN_DIR it was found under, as given.")
    episode: str = Field(description="The episode folder, relative to the run folder.")
    episode_id: str
    task_id: str
    goal: str
    success: bool
    reward: float = 0.0
    steps: list[TrajectoryStep]

    @property
    def key(self) -> str:
        """A file-name-safe id, unique across the runs given to one prune."""
        return safe_name(f"{Path(self.run).name}__{self.episode.replace('/', '__')}")


@dataclass
class Selection:
    """The trajectories to prune, and every episode left out with the reason."""

    trajectories: list[Trajectory] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    pass_rates: dict[str, float] = field(default_factory=dict)


def find_episode_dirs(run_dir: Path) -> list[Path]:
    """Every folder under ``run_dir`` (itself included) with summary.json and steps.jsonl."""
    found: list[Path] = []
    pending = [run_dir]
    while pending:
        folder = pending.pop()
        if (folder / "summary.json").is_file() and (folder / "steps.jsonl").is_file():
            found.append(folder)
            continue
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError:
            continue
        pending.extend(reversed([c for c in children if c.name not in SKIPPED_FOLDERS]))
    return sorted(found)


def require_episodes(run_dirs: Sequence[Path]) -> None:
    """Refuse a folder that is missing or holds no episode folder, naming it
    (``ConfigError``): pruning or remembering it wrote an empty result and exited 0, as
    if its episodes had held nothing worth keeping."""
    for run_dir in run_dirs:
        if not run_dir.is_dir():
            raise ConfigError(f"{run_dir}: no such run folder")
        if not find_episode_dirs(run_dir):
            raise ConfigError(f"{run_dir}: not a run, bench or episode folder (no folder "
                              "under it holds summary.json and steps.jsonl)")


def read_trajectory(run_dir: Path, episode_dir: Path) -> Trajectory | str:
    """The episode's trajectory, or the reason it cannot be one."""
    try:
        summary = read_summary(episode_dir)
        read = read_steps_checked(episode_dir)
    except (OSError, ValueError) as exc:
        log.warning("episode left out: unreadable trace", episode=str(episode_dir),
                    error=str(exc))
        return f"unreadable trace: {exc}"
    if read.problems:
        # A trajectory with a step missing would teach a history that never happened.
        log.warning("episode left out: damaged trace", episode=str(episode_dir),
                    problems=read.problems)
        return "damaged trace: " + "; ".join(read.problems)
    records = read.records
    if summary.status == "running":
        return "episode never finished (summary status is running)"
    if not records:
        return "no steps"
    goal = summary.goal.strip()
    if not goal:
        return "no goal in summary.json"
    # A person's action (or a model action a person kept from running) must never be
    # taught as the model's: such episodes are left out whole, since every later page
    # follows from what the person did.
    human = [f"{r.index}: {r.operator}" for r in records if r.operator in HUMAN_OPERATORS]
    if human:
        return f"a person decided steps at the step-through prompt ({', '.join(human)})"
    if summary.replay is not None:
        # its steps are a recorded program's (pruned already, or prunable where recorded),
        # and its thoughts are the recording's, not answers to these pages
        return f"a replay of {summary.replay.program}"
    steps = [
        TrajectoryStep(
            index=r.index,
            url=r.url,
            tabs=r.tabs,
            focused_bid=r.focused_bid,
            observation=r.observation,
            last_action_error=r.last_action_error,
            think=r.think,
            action=r.action or r.action_raw,
            action_error=r.action_error,
            operator=r.operator,
            page_key=page_key(r.url, r.tree_lines()) if r.axtree else "",
        )
        for r in records
    ]
    relative = episode_dir.relative_to(run_dir).as_posix()
    return Trajectory(
        run=str(run_dir),
        episode=relative if relative != "." else episode_dir.name,
        episode_id=summary.episode_id,
        task_id=summary.task_id,
        goal=goal,
        success=bool(summary.success),
        reward=summary.reward,
        steps=steps,
    )


def collect_trajectories(
    run_dirs: list[Path],
    *,
    include_failed: bool = False,
    pass_rate: tuple[float, float] | None = None,
) -> Selection:
    """Read every episode under ``run_dirs`` and keep the ones worth pruning.

    Only successful episodes are kept unless ``include_failed``: a pruned failure would
    teach the shortest way to a wrong answer. With ``pass_rate=(low, high)`` only tasks
    whose pass rate over all their episodes is in (low, high] are kept — the paper's
    rejection sampling (0, 0.5], which keeps tasks that are hard but solvable.
    """
    selection = Selection()
    readable: list[Trajectory] = []
    for run_dir in run_dirs:
        for episode_dir in find_episode_dirs(run_dir):
            result = read_trajectory(run_dir, episode_dir)
            if isinstance(result, str):
                selection.skipped.append((str(episode_dir), result))
            else:
                readable.append(result)
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for trajectory in readable:
        by_task[trajectory.task_id].append(trajectory)
    for task_id, episodes in by_task.items():
        selection.pass_rates[task_id] = sum(t.success for t in episodes) / len(episodes)
    for trajectory in readable:
        where = f"{trajectory.run}/{trajectory.episode}"
        rate = selection.pass_rates[trajectory.task_id]
        if pass_rate is not None and not pass_rate[0] < rate <= pass_rate[1]:
            selection.skipped.append(
                (where, f"task pass rate {rate:.2f} outside ({pass_rate[0]}, {pass_rate[1]}]"))
        elif not trajectory.success and not include_failed:
            selection.skipped.append((where, "episode did not succeed"))
        else:
            selection.trajectories.append(trajectory)
    log.info("trajectories collected", kept=len(selection.trajectories),
             skipped=len(selection.skipped))
    return selection
