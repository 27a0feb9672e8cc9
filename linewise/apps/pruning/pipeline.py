"""The pruning pipeline: traces -> graphs -> vote -> rewritten trajectories -> dataset.

``run_prune`` opens the models the way ``linewise run`` does (``runtime.models.factory``:
the embedded model when no endpoint is configured) and hands them to ``prune_trajectories``,
which tests and other callers can use with clients of their own.

Trajectories are processed concurrently (``concurrency`` at a time; the chat clients
bound the requests in flight). Within one trajectory the vote's runs are sequential so
that it can stop once decided, and phase 2 of a build is sequential by nature.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from pathlib import Path

import structlog

from linewise.agent.models import ChatModel
from linewise.apps.progress import QUIET, ProgressDisplay
from linewise.apps.pruning.dialogue import PrunedStep
from linewise.apps.pruning.export import (
    OutcomeLog,
    PruneStats,
    TrajectoryOutcome,
    measure,
    write_dataset,
)
from linewise.apps.pruning.extractor import ExtractorConfig, GraphExtractor
from linewise.apps.pruning.graph import StateGraph, save_graph
from linewise.apps.pruning.miner import MiningResult, mine
from linewise.apps.pruning.options import PruneOptions
from linewise.apps.pruning.render import render_svg
from linewise.apps.pruning.rewriter import ThoughtRewriter
from linewise.apps.pruning.trajectory import Trajectory, collect_trajectories
from linewise.apps.pruning.vote import ActionSet, tally
from linewise.errors import GraphBuildError, GraphError
from linewise.settings import LinewiseSettings

log = structlog.get_logger(__name__)


async def run_prune(
    run_dirs: list[Path], out_dir: Path, settings: LinewiseSettings, options: PruneOptions,
    *, progress: ProgressDisplay = QUIET,
) -> PruneStats:
    """Collect the trajectories under ``run_dirs``, prune them and write ``out_dir``;
    ``progress`` shows each trajectory's verdict as it comes."""
    from linewise.runtime.models.factory import chat_client, open_endpoints

    started = time.perf_counter()
    selection = collect_trajectories(run_dirs, include_failed=options.include_failed,
                                     pass_rate=options.pass_rate)
    trajectories = selection.trajectories[: options.limit] if options.limit else \
        selection.trajectories
    async with contextlib.AsyncExitStack() as stack:
        if trajectories:
            base: ChatModel | None
            extractor: ChatModel | None
            # The action endpoint is the base model; the retriever is never asked.
            base, _ = await stack.enter_async_context(open_endpoints(settings,
                                                                     retriever=False))
            extractor = base
            if options.extractor_base_url:
                # another server: the action endpoint's profile is not its own
                extractor_client = chat_client(settings.action.model_copy(update={
                    "base_url": options.extractor_base_url, "model": options.extractor_model,
                    "profile": "auto"}), settings)
                stack.push_async_callback(extractor_client.close)
                extractor = extractor_client
        else:  # nothing to prune: do not start a model just to write empty files
            base = extractor = None
        stats = await prune_trajectories(trajectories, out_dir, extractor, base, options,
                                         skipped=selection.skipped, progress=progress)
    stats.episodes_found = len(selection.trajectories) + len(selection.skipped)
    stats.elapsed_s = round(time.perf_counter() - started, 2)
    (out_dir / "stats.json").write_text(stats.model_dump_json(indent=2), encoding="utf-8")
    return stats


async def prune_trajectories(
    trajectories: list[Trajectory],
    out_dir: Path,
    extractor_client: ChatModel | None,
    base_client: ChatModel | None,
    options: PruneOptions,
    skipped: list[tuple[str, str]] | None = None,
    progress: ProgressDisplay = QUIET,
) -> PruneStats:
    """Prune ``trajectories`` with the given clients and write the dataset to ``out_dir``.

    ``extractor_client`` builds graphs and drafts rewrites; ``base_client`` is the base
    model whose perplexity picks among the drafts (None: always the first draft).
    """
    stats = PruneStats(trajectories_in=len(trajectories), skipped=len(skipped or []),
                       repeats=options.repeats, mode=options.mode)
    outcomes: list[tuple[TrajectoryOutcome, Trajectory]] = []
    outcome_log = OutcomeLog(out_dir)
    if trajectories:
        assert extractor_client is not None
        extractor = GraphExtractor(extractor_client, ExtractorConfig(
            temperature=options.extract_temperature, retries=options.build_retries,
            max_obs_tokens=options.max_obs_tokens))
        rewriter = ThoughtRewriter(extractor_client, base_client,
                                   candidates=options.candidates,
                                   temperature=options.rewrite_temperature)
        worker = _Worker(extractor, rewriter, options, out_dir / "graphs")
        limit = asyncio.Semaphore(options.concurrency)
        tally = progress.tally("prune", "trajectories", len(trajectories))

        async def bounded(trajectory: Trajectory) -> TrajectoryOutcome:
            async with limit:
                outcome = await worker.prune(trajectory)
            outcome_log.append(outcome)
            tally.advance(outcome.status)
            return outcome

        try:
            results = await asyncio.gather(*(bounded(t) for t in trajectories))
        finally:
            tally.close()
        outcomes = list(zip(results, trajectories, strict=True))
        for name, value in dataclasses.asdict(extractor.usage).items():
            setattr(stats, f"extractor_{name}", value)  # every counter has its stats field
        stats.rewriter_calls = rewriter.usage.calls
        stats.rewrites = rewriter.usage.rewrites
        stats.rewrites_by_perplexity = rewriter.usage.by_perplexity
        stats.rewrites_first_candidate = rewriter.usage.first_candidate
        stats.rewrite_copies_dropped = rewriter.usage.copies_dropped
    for outcome, _ in outcomes:
        stats.built += outcome.status != "build_failed"
        stats.build_failed += outcome.status == "build_failed"
        stats.discarded += outcome.status == "discarded"
        if outcome.status in ("pruned", "unpruned"):
            stats.agreed += 1
            stats.pruned += outcome.status == "pruned"
            stats.unpruned += outcome.status == "unpruned"
            stats.rounds_before += outcome.steps
            stats.rounds_after += len(outcome.kept_steps)
            stats.tokens_before += outcome.tokens_before
            stats.tokens_after += outcome.tokens_after
    write_dataset(out_dir, outcomes, skipped or [], stats)
    return stats


class _Worker:
    """Prunes one trajectory at a time: vote over builds, rewrite, render."""

    def __init__(self, extractor: GraphExtractor, rewriter: ThoughtRewriter,
                 options: PruneOptions, graph_dir: Path) -> None:
        self.extractor = extractor
        self.rewriter = rewriter
        self.options = options
        self.graph_dir = graph_dir

    async def prune(self, trajectory: Trajectory) -> TrajectoryOutcome:
        outcome = TrajectoryOutcome(
            key=trajectory.key, run=trajectory.run, episode=trajectory.episode,
            task_id=trajectory.task_id, status="build_failed", steps=len(trajectory.steps))
        if len(trajectory.steps) == 1:  # the sink is always kept: no LLM can change that
            outcome.status, outcome.reason = "unpruned", "a single step: nothing to prune"
            outcome.kept_steps = [trajectory.steps[0].index]
            outcome.kept = [PrunedStep(index=s.index, think=s.think, action=s.action,
                                       original_think=s.think) for s in trajectory.steps]
            measure(outcome, trajectory)
            return outcome
        sets: list[ActionSet | None] = []
        mined: list[tuple[int, StateGraph, MiningResult]] = []
        vote = None
        for run in range(1, self.options.repeats + 1):
            try:
                graph = await self.extractor.build(trajectory)
                result = mine(graph)
            except (GraphBuildError, GraphError) as exc:
                sets.append(None)
                outcome.errors.append(f"run {run}: {exc}")
                log.warning("graph not built", trajectory=trajectory.key, run=run, error=str(exc))
            else:
                sets.append(tuple(result.necessary_actions))
                mined.append((run, graph, result))
                save_graph(graph.model_copy(update={
                    "necessary_actions": result.necessary_actions, "run": run}),
                    self.graph_dir / f"{trajectory.key}.run{run}.json")
            vote = tally(sets, self.options.repeats)
            if vote is not None:
                break
        assert vote is not None
        outcome.vote_runs = [list(s) if s is not None else None for s in sets]
        outcome.reason = vote.reason
        if vote.accepted is None:
            if vote.failed < vote.runs:
                outcome.status = "discarded"
            for run, graph, result in mined:  # a picture of each run, to see how they differ
                self._render(graph, result, f"{trajectory.key}.run{run}.svg",
                             f"{trajectory.task_id} — discarded, run {run} of "
                             f"{len(sets)} keeps {', '.join(result.necessary_actions)} "
                             f"({vote.reason})")
            log.warning("trajectory discarded", trajectory=trajectory.key, status=outcome.status,
                        reason=vote.reason)
            return outcome
        graph, result = next((g, r) for _, g, r in mined if tuple(r.necessary_actions) ==
                             vote.accepted)
        positions = sorted(int(action_id[1:]) - 1 for action_id in vote.accepted)
        outcome.kept_steps = [trajectory.steps[p].index for p in positions]
        if len(positions) == len(trajectory.steps):
            outcome.status = "unpruned"
            outcome.kept = [PrunedStep(index=s.index, think=s.think, action=s.action,
                                       original_think=s.think) for s in trajectory.steps]
        else:
            outcome.status = "pruned"
            outcome.kept = await self.rewriter.rewrite(trajectory, positions)
        measure(outcome, trajectory)
        title = (f"{trajectory.task_id} — {outcome.status}: {len(positions)} of "
                 f"{len(trajectory.steps)} steps kept ({vote.reason})")
        self._render(graph, result, f"{trajectory.key}.svg", title)
        log.info("trajectory pruned", trajectory=trajectory.key, status=outcome.status,
                 kept=outcome.kept_steps, steps=len(trajectory.steps))
        return outcome

    def _render(self, graph: StateGraph, result: MiningResult, name: str, title: str) -> None:
        (self.graph_dir / name).write_text(
            render_svg(graph, set(result.necessary_nodes), title), encoding="utf-8")
