"""The improve loop's retriever (``linewise improve --retrain-retriever``): each round, a
bi-encoder trained on the training benches' own solved steps, and how often the test
benches' views showed the elements the agent acted on.

Rules, and why:

- The examples are every successful training episode's steps so far (``trace_examples``:
  the query the filter formed at that step, the unit holding the element the action
  named, hard negatives from the same page). Test benches are never a source: the
  figures they give would measure the retriever on its own training data.
- Each round trains from the base encoder on every round's examples, with one seed: the
  same benches give the same weights whatever round the loop was stopped in, so a loop
  that is run again keeps a round's weights when its training bench ran nothing new.
- Too few examples (fewer than two solved steps that named an element) train nothing:
  the round's benches keep the weights they had (the caller's, or none) and the report
  says so.
- ``targets shown`` is, over every step of a bench whose action named elements in the
  tree, the share of those elements the filter's view showed: the retriever's recall
  as the agent met it, on the pages of the test seeds.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Sequence
from pathlib import Path

import structlog
from pydantic import BaseModel, Field

from linewise.apps.bench.results import RESULTS_FILE, read_results
from linewise.errors import DamagedTraceError
from linewise.runtime.trace import read_steps

log = structlog.get_logger(__name__)

WEIGHTS_DIR = "retriever"
"""A round's trained weights: ``DIR/round-R/retriever/`` (a ``--retriever-weights``
folder)."""

MIN_EXAMPLES = 2
"""In-batch negatives need two examples at least."""


class Retrained(BaseModel):
    """What a round's retraining made."""

    weights: str | None = Field(description="The weights folder; None when nothing was "
                                "trained (too few examples).")
    examples: int = Field(description="Training examples from the training benches' steps.")


def _examples_in(manifest: Path) -> int:
    try:
        metrics = json.loads(manifest.read_text(encoding="utf-8")).get("metrics", {})
    except (OSError, ValueError):
        return 0
    return int(metrics.get("examples", 0)) if isinstance(metrics, dict) else 0


async def retrain_retriever(train_dirs: Sequence[Path], out: Path, *, keep: bool,
                            seed: int = 0, command: Sequence[str] = ()) -> Retrained:
    """Train on the solved steps of ``train_dirs`` and export the weights to ``out``.

    ``keep``: the training benches are as when ``out`` was written (they ran nothing
    new), so weights already there are kept. Training runs in a worker thread, so the
    loop's progress display goes on.

    Raises:
        ConfigError: a training folder of a page family reserved for evaluation.
        ModelError: the base encoder cannot be found or read.
    """
    if keep and (out / "manifest.json").is_file():
        return Retrained(weights=str(out), examples=_examples_in(out / "manifest.json"))
    from linewise.apps.retriever.examples import trace_examples

    examples = trace_examples(train_dirs, seed=seed)
    if len(examples) < MIN_EXAMPLES:
        log.info("retriever not retrained", examples=len(examples), out=str(out))
        return Retrained(weights=None, examples=len(examples))

    def fit() -> Retrained:
        from linewise.apps.retriever.export import export_trained
        from linewise.apps.retriever.train import TrainOptions, train

        result = train(examples, TrainOptions(seed=seed))
        export_trained(result, out, command=shlex.join(command),
                       sources=[str(folder) for folder in train_dirs])
        return Retrained(weights=str(out), examples=len(examples))

    return await asyncio.to_thread(fit)


def targets_shown(bench: Path) -> float | None:
    """The share of the elements the bench's actions named (and the tree had) that the
    filter's view showed; None when no step named one. Each episode of the bench's
    results file counts once; one without a folder, or a damaged one, is skipped."""
    named = hidden = 0
    for result in read_results(bench / RESULTS_FILE):
        if not result.episode_dir:
            continue
        try:
            steps = read_steps(bench / result.episode_dir)
        except DamagedTraceError:
            continue
        for step in steps:
            if step.filter_result is None or not step.targets:
                continue
            named += len(step.targets)
            hidden += len(step.filter_result.misses)
    return None if named == 0 else (named - hidden) / named
