"""Building a memory: successful episodes of run and bench folders -> memory entries.

An episode becomes an entry when it succeeded (the pruner's own selection,
``pruning/trajectory.collect_trajectories``, decides which episodes count). Its steps
are the pruner's kept steps where ``linewise prune`` left a verdict for it (pruned, or
agreed that nothing could go: ``trajectories.jsonl`` of the dataset folders given),
else the steps whose action parsed, ran without error and changed the page (``noop``
left out). Each step
keeps the acted element's own line of the view the agent was shown (its bid, role and
name), its thought and its action, and nothing else of the page: a page's text around
a clicked button is untrusted, and an entry shows it to unrelated episodes as a worked
example. What the step keeps is then checked for text written for an agent, which is
withheld or left out (``agent/experience/untrusted.py``; the report counts it). A
problem (task, seed and goal) solved several times is one entry, its shortest solution.
"""

from __future__ import annotations

from pathlib import Path

import structlog
from pydantic import BaseModel, Field, ValidationError

from linewise.agent.action_parser import parse_action
from linewise.agent.experience.store import MemoryEntry, MemoryStep, task_key
from linewise.agent.experience.untrusted import element_line, safe_step
from linewise.agent.text.embedders import Embedder
from linewise.apps.pruning.export import TRAJECTORIES_FILE, TrajectoryOutcome
from linewise.apps.pruning.trajectory import Trajectory, TrajectoryStep, collect_trajectories
from linewise.errors import ActionParseError, LinewiseError
from linewise.jsonl import read_jsonl

log = structlog.get_logger(__name__)

BENCH_RESULTS = "results.jsonl"
"""A bench folder's results lines (apps/bench/results.py): the seed and benchmark of
each episode folder, read here as plain JSON."""

VERDICTS_KEPT = frozenset({"pruned", "unpruned"})


class BuildReport(BaseModel):
    """What a build found and kept."""

    episodes: int = Field(default=0, description="Episode folders found.")
    successful: int = 0
    entries: int = 0
    from_pruner: int = Field(default=0, description="Entries whose steps the pruner chose.")
    skipped: dict[str, int] = Field(default_factory=dict, description="Episodes left out, "
                                    "by reason.")
    embedder: str | None = None
    embedding_note: str | None = Field(default=None, description="Why entries have no vectors.")
    withheld: int = Field(default=0, description="Steps that held instruction-like text "
                          "(untrusted.py): left out, or kept without their thought or the "
                          "element's name.")


def memory_step(step: TrajectoryStep, think: str | None, action: str) -> MemoryStep:
    """The step as recorded in an entry, before ``untrusted.safe_step`` checks it: the
    acted element's own line, the thought and the action."""
    try:
        bids = parse_action(action).bids
    except ActionParseError:
        bids = []
    return MemoryStep(index=step.index, url=step.url, think=(think or "").strip(),
                      action=action,
                      observation=element_line(step.observation, bids[0] if bids else None))


def steps_without_error(trajectory: Trajectory) -> list[MemoryStep]:
    """The steps whose action parsed, ran without error and changed the page (no
    ``noop``; the last step is kept, its outcome being the task's end). A step after
    which the page was the same (``TrajectoryStep.page_key``) taught nothing but the
    loop (a focus before the click, one option selected three times), and a model shown
    an example copies its steps, loops included."""
    kept: list[MemoryStep] = []
    steps = trajectory.steps
    for position, step in enumerate(steps):
        if step.action is None or step.action_error:
            continue
        try:
            parsed = parse_action(step.action)
        except ActionParseError:
            continue
        after = steps[position + 1].page_key if position + 1 < len(steps) else ""
        if parsed.name == "noop" or (after and after == step.page_key):
            continue
        kept.append(memory_step(step, step.think, str(parsed)))
    return kept


def pruned_steps(trajectory: Trajectory, verdict: TrajectoryOutcome) -> list[MemoryStep]:
    """The pruner's kept steps, with their (possibly rewritten) thoughts."""
    originals = {s.index: s for s in trajectory.steps}
    return [memory_step(originals[kept.index], kept.think, kept.action)
            for kept in verdict.kept if kept.action and kept.index in originals]


def read_verdicts(dataset_dirs: list[Path]) -> dict[Path, TrajectoryOutcome]:
    """The pruner's agreed verdicts (pruned or unpruned), by episode folder."""
    verdicts: dict[Path, TrajectoryOutcome] = {}
    for folder in dataset_dirs:
        path = folder / TRAJECTORIES_FILE
        if not path.exists():
            log.warning("no pruner verdicts here", folder=str(folder))
            continue
        for line in read_jsonl(path.read_bytes()):
            data = line.value
            if line.error is not None or not isinstance(data, dict):
                log.warning("pruner verdict skipped: damaged line", path=str(path),
                            line=line.number, error=line.error or "not an object")
                continue
            if data.get("status") not in VERDICTS_KEPT:
                continue
            try:
                verdict = TrajectoryOutcome.model_validate(data)
            except (ValidationError, RecursionError) as exc:
                log.warning("pruner verdict skipped: not a verdict", path=str(path),
                            line=line.number, error=str(exc).split("\n")[0])
                continue
            verdicts[(Path(verdict.run) / verdict.episode).resolve()] = verdict
    return verdicts


def read_bench_rows(run_dirs: list[Path]) -> dict[Path, dict[str, object]]:
    """The results lines of bench folders, by episode folder."""
    rows: dict[Path, dict[str, object]] = {}
    for run_dir in run_dirs:
        path = run_dir / BENCH_RESULTS
        if not path.exists():
            continue
        for line in read_jsonl(path.read_bytes()):
            row = line.value  # None for a damaged or torn line, which is skipped
            if isinstance(row, dict) and row.get("episode_dir"):
                rows[(run_dir / str(row["episode_dir"])).resolve()] = row
    return rows


def _safe_steps(steps: list[MemoryStep], site: str) -> tuple[list[MemoryStep], int]:
    """The steps as an entry may show them, and how many were changed or left out."""
    kept: list[MemoryStep] = []
    withheld = 0
    for step in steps:
        safe = safe_step(step, site)
        if safe is None:
            log.warning("memory step left out: its action carries instruction-like text",
                        action=step.action[:200])
            withheld += 1
            continue
        if safe.think != " ".join(step.think.split()) or safe.observation != step.observation:
            withheld += 1
        kept.append(safe)
    return kept, withheld


def kind_of(task_id: str) -> str:
    prefix = task_id.split(".", 1)[0]
    if prefix == "browsergym":
        return "browsergym/" + task_id.split(".")[1]
    return prefix if prefix == "miniwob" else "web"


async def build_memory(
    run_dirs: list[Path],
    dataset_dirs: list[Path] | None = None,
    *,
    embedder: Embedder | None = None,
) -> tuple[list[MemoryEntry], BuildReport]:
    """The entries of every successful episode under ``run_dirs`` (see the module's
    docstring); ``dataset_dirs``: ``linewise prune --out`` folders whose verdicts apply;
    ``embedder``: the vectors of each entry's search text (lexical only without one)."""
    selection = collect_trajectories(run_dirs)
    verdicts = read_verdicts(dataset_dirs or [])
    rows = read_bench_rows(run_dirs)
    report = BuildReport(episodes=len(selection.trajectories) + len(selection.skipped),
                         successful=len(selection.trajectories))
    for _, why in selection.skipped:
        reason = "did not succeed" if why == "episode did not succeed" else why.split(":")[0]
        report.skipped[reason] = report.skipped.get(reason, 0) + 1
    entries: dict[str, MemoryEntry] = {}
    for trajectory in selection.trajectories:
        folder = (Path(trajectory.run) / trajectory.episode).resolve()
        verdict = verdicts.get(folder)
        steps = (pruned_steps(trajectory, verdict) if verdict is not None
                 else steps_without_error(trajectory))
        if not steps:
            report.skipped["no step without error"] = (
                report.skipped.get("no step without error", 0) + 1)
            continue
        site = trajectory.steps[0].url
        steps, withheld = _safe_steps(steps, site)
        report.withheld += withheld
        if not steps:
            report.skipped["only instruction-like steps"] = (
                report.skipped.get("only instruction-like steps", 0) + 1)
            continue
        row = rows.get(folder, {})
        seed = row.get("seed")
        key = task_key(trajectory.task_id, seed if isinstance(seed, int) else None)
        entry = MemoryEntry(
            id=f"{trajectory.task_id}/{trajectory.episode_id}", task_id=trajectory.task_id,
            task=key.task, seed=key.seed, kind=str(row.get("benchmark") or
                                                   kind_of(trajectory.task_id)),
            goal=trajectory.goal, source=str(folder), site=site, pruned=verdict is not None,
            steps=steps,
        )
        # One entry per problem (task, seed, goal): the shortest solution of those found
        # (an improve loop meets the same training seeds every round).
        problem = f"{entry.task}\n{entry.seed}\n{entry.goal}"
        if problem not in entries or len(steps) < len(entries[problem].steps):
            entries[problem] = entry
    ordered = sorted(entries.values(), key=lambda e: (e.task, e.seed or 0, e.id))
    report.entries = len(ordered)
    report.from_pruner = sum(e.pruned for e in ordered)
    if embedder is not None and ordered:
        try:
            vectors = await embedder.embed([e.search_text() for e in ordered])
        except LinewiseError as exc:
            report.embedding_note = f"embedder failed, entries are lexical only: {exc}"
            log.warning("memory entries not embedded", error=str(exc))
        else:
            report.embedder = embedder.name
            ordered = [e.model_copy(update={"embedder": embedder.name,
                                             "embedding": [round(float(x), 5) for x in v]})
                       for e, v in zip(ordered, vectors, strict=True)]
    elif embedder is None:
        report.embedding_note = "no embedder: entries are lexical only"
    return ordered, report
