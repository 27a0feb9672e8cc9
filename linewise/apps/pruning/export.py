"""Writing the dataset folder: training JSONL, per-trajectory report, graphs and stats.

    DATASET_DIR/pruned.jsonl         trajectories with redundant rounds removed
    DATASET_DIR/hybrid.jsonl         pruned.jsonl + trajectories with nothing to prune
                                     (of tasks not already in pruned.jsonl; --mode hybrid)
    DATASET_DIR/trajectories.jsonl   every trajectory's fate: status, vote, kept steps, why
    DATASET_DIR/graphs/<key>.run<N>.json   each built graph with its mined actions
    DATASET_DIR/graphs/<key>.svg     the agreed graph, necessary nodes highlighted
    DATASET_DIR/stats.json           the counts (PruneStats)

Each training line is ``{"messages": [...], "metadata": {...}}``: the chat-messages
format that fine-tuning tools (OpenAI, TRL, axolotl, LLaMA-Factory's sharegpt/openai
styles) accept, with the provenance of the trajectory in ``metadata``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from linewise.apps.pruning.dialogue import PrunedStep, training_messages
from linewise.apps.pruning.trajectory import Trajectory
from linewise.tokens import count_message_tokens

Status = Literal["pruned", "unpruned", "discarded", "build_failed"]


class TrajectoryOutcome(BaseModel):
    """What the pipeline did with one trajectory."""

    key: str
    run: str
    episode: str
    task_id: str
    status: Status
    reason: str = ""
    steps: int
    kept_steps: list[int] = Field(default_factory=list,
                                  description="Indices of the kept steps in the episode.")
    vote_runs: list[list[str] | None] = Field(
        default_factory=list, description="Each run's necessary actions (None: failed).")
    errors: list[str] = Field(default_factory=list)
    kept: list[PrunedStep] = Field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0


class PruneStats(BaseModel):
    """stats.json. Rounds and tokens are summed over the agreed trajectories (pruned and
    unpruned); tokens are tiktoken counts of the exported chat messages, before (every
    step, original thoughts) and after pruning and rewriting."""

    episodes_found: int = 0
    skipped: int = Field(default=0, description="Episodes left out before pruning "
                         "(unfinished, failed, rejection sampling); see trajectories.jsonl.")
    trajectories_in: int = 0
    built: int = Field(default=0, description="Trajectories with at least one graph built.")
    agreed: int = 0
    pruned: int = 0
    unpruned: int = 0
    discarded: int = Field(default=0, description="Built, but the vote did not agree.")
    build_failed: int = 0
    rounds_before: int = 0
    rounds_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    rewrites: int = 0
    rewrites_by_perplexity: int = 0
    rewrites_first_candidate: int = 0
    rewrite_copies_dropped: int = 0
    exported_pruned: int = 0
    exported_hybrid: int = 0
    extractor_calls: int = 0
    extractor_retries: int = 0
    extractor_text_matches: int = 0
    extractor_intent_matches: int = 0
    extractor_traced_back: int = 0
    extractor_prompt_copies: int = 0
    extractor_prompt_tokens: int = 0
    extractor_completion_tokens: int = 0
    rewriter_calls: int = 0
    repeats: int = 3
    mode: str = "hybrid"
    elapsed_s: float = 0.0


def measure(outcome: TrajectoryOutcome, trajectory: Trajectory) -> None:
    """Fill the outcome's token counts: the full trajectory vs what is exported."""
    originals = {s.index: s for s in trajectory.steps}
    full = [PrunedStep(index=s.index, think=s.think, action=s.action) for s in trajectory.steps]
    outcome.tokens_before = count_message_tokens(
        training_messages(trajectory.goal, full, originals))
    outcome.tokens_after = count_message_tokens(
        training_messages(trajectory.goal, outcome.kept, originals))


def training_line(outcome: TrajectoryOutcome, trajectory: Trajectory) -> str:
    originals = {s.index: s for s in trajectory.steps}
    return json.dumps({
        "messages": training_messages(trajectory.goal, outcome.kept, originals),
        "metadata": {
            "run": trajectory.run,
            "episode": trajectory.episode,
            "episode_id": trajectory.episode_id,
            "task_id": trajectory.task_id,
            "kept_steps": outcome.kept_steps,
            "steps_before": outcome.steps,
            "rewritten_steps": [s.index for s in outcome.kept if s.rewritten],
            "source": "pruned" if outcome.status == "pruned" else "unpruned",
        },
    }, ensure_ascii=False)


TRAJECTORIES_FILE = "trajectories.jsonl"


class OutcomeLog:
    """``trajectories.jsonl``, one line appended (and flushed) as each trajectory ends.

    A prune of many trajectories takes hours with a CPU model; killed partway, it keeps
    every verdict reached so far. ``write_dataset`` adds the skipped episodes at the end.
    """

    def __init__(self, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / TRAJECTORIES_FILE
        self.path.write_text("", encoding="utf-8")

    def append(self, outcome: TrajectoryOutcome) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(outcome.model_dump_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def write_dataset(
    out_dir: Path,
    outcomes: list[tuple[TrajectoryOutcome, Trajectory]],
    skipped: list[tuple[str, str]],
    stats: PruneStats,
) -> None:
    """Write the JSONL files, the report and stats.json (graphs are written as built, and
    the outcomes by ``OutcomeLog`` as they come)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pruned = [(o, t) for o, t in outcomes if o.status == "pruned"]
    pruned_tasks = {o.task_id for o, _ in pruned}
    unpruned = [(o, t) for o, t in outcomes
                if o.status == "unpruned" and o.task_id not in pruned_tasks]
    with (out_dir / "pruned.jsonl").open("w", encoding="utf-8") as handle:
        for outcome, trajectory in pruned:
            handle.write(training_line(outcome, trajectory) + "\n")
    stats.exported_pruned = len(pruned)
    hybrid_path = out_dir / "hybrid.jsonl"
    if stats.mode == "hybrid":
        with hybrid_path.open("w", encoding="utf-8") as handle:
            for outcome, trajectory in [*pruned, *unpruned]:
                handle.write(training_line(outcome, trajectory) + "\n")
        stats.exported_hybrid = len(pruned) + len(unpruned)
    elif hybrid_path.exists():
        hybrid_path.unlink()  # a stale file from an earlier hybrid prune would mislead
    with (out_dir / TRAJECTORIES_FILE).open("a", encoding="utf-8") as handle:
        for where, why in skipped:
            handle.write(json.dumps({"episode": where, "status": "skipped", "reason": why})
                         + "\n")
    (out_dir / "stats.json").write_text(stats.model_dump_json(indent=2), encoding="utf-8")
