"""A whole bench: read what is done, run the rest on a backend, record every result.

The driver is the only writer of ``results.jsonl`` (Ray workers hand their results
back), so appends never interleave. Before anything runs it reconciles the folder with
the file:

1. a results line of an infrastructure (or stopped) ending is taken out of the file
   into ``_infra/results.jsonl``, its folder moved under ``_infra/``, and the episode
   runs again; with ``retry_errors``, so is every line with an error;
2. episodes with a results line left are done;
3. an episode whose folder holds an ended summary of an agent outcome but no line
   (killed between the two writes) is recovered from its folder, not run again;
4. every other episode that left a folder is set aside under ``_incomplete/`` and runs
   from scratch.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import structlog

from linewise.agent.experience.load import check_memory_leak
from linewise.agent.experience.store import task_key
from linewise.apps.bench.local import run_local
from linewise.apps.bench.manifest import (
    RunEnd,
    StopReason,
    check_manifest,
    record_end,
    write_manifest,
)
from linewise.apps.bench.options import BenchOptions
from linewise.apps.bench.plan import (
    INFRA_DIR,
    EpisodeSpec,
    finished_summary,
    set_aside_unfinished,
)
from linewise.apps.bench.progress import LogProgress, Progress
from linewise.apps.bench.results import (
    RESULTS_FILE,
    EpisodeResult,
    ResultsWriter,
    read_results,
    result_from_summary,
    take_out,
)
from linewise.errors import EndpointRefused, TraceWriteError
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.budget import Budget
from linewise.runtime.run import prepare_run
from linewise.runtime.trace import read_steps, read_summary
from linewise.settings import LinewiseSettings

log = structlog.get_logger(__name__)

Backend = Literal["local", "ray"]


@dataclass
class BenchOutcome:
    results: list[EpisodeResult]
    """Every line of results.jsonl after the run (earlier runs' included)."""
    ran: int
    recovered: int
    skipped: int
    set_aside: list[Path] = field(default_factory=list)
    budget_stop: str | None = None
    """Why the bench started no more episodes (its run budget), if it stopped early."""
    not_started: int = 0
    retried: int = 0
    """Earlier infrastructure endings (and, with retry_errors, errors) run again."""
    stopped: str | None = None
    """Why the bench stopped before running everything (resumable), or None."""
    memory_overlap: list[str] = field(default_factory=list)
    """Episodes the memory (``--memory``) was built from that this bench ran anyway
    (``allow_memory_overlap``): its success rate is not a clean test."""


def take_back_endings(
    out_dir: Path, specs: list[EpisodeSpec], *, retry_errors: bool = False
) -> int:
    """Take the results lines that do not stand (``EpisodeResult.is_final``; with
    ``retry_errors`` also every line with an error) out of results.jsonl, and their
    folders under ``_infra/``: those episodes run again. Returns how many."""
    path = out_dir / RESULTS_FILE
    mine = {s.key: s for s in specs}
    again = {r.key for r in read_results(path) if r.key in mine
             and (not r.is_final or (retry_errors and r.error_kind is not None))}
    taken = take_out(path, again, out_dir / INFRA_DIR / RESULTS_FILE)
    set_aside_unfinished(out_dir, [mine[r.key] for r in taken], INFRA_DIR)
    for r in taken:
        log.info("episode runs again", episode=str(r.key), outcome=r.outcome,
                 infra_kind=r.infra_kind, error=r.error)
    return len(taken)


def reconcile(
    out_dir: Path, specs: list[EpisodeSpec], writer: ResultsWriter, backend: str
) -> tuple[list[EpisodeSpec], int, int, list[Path]]:
    """(specs still to run, how many were done, how many recovered, folders set aside)."""
    done = {r.key for r in read_results(writer.path)}
    skipped = sum(1 for s in specs if s.key in done)
    recovered = 0
    for spec in specs:
        if spec.key in done or not finished_summary(out_dir, spec):
            continue
        folder = spec.folder(out_dir)
        writer.append(result_from_summary(
            spec, read_summary(folder), read_steps(folder), backend=backend, recovered=True
        ))
        done.add(spec.key)
        recovered += 1
        log.info("episode recovered from its folder", episode=str(spec.key))
    pending = [s for s in specs if s.key not in done]
    return pending, skipped, recovered, set_aside_unfinished(out_dir, pending)


async def run_bench(
    specs: list[EpisodeSpec],
    settings: LinewiseSettings,
    browser_config: BrowserConfig,
    out_dir: Path,
    options: BenchOptions,
    *,
    backend: Backend = "local",
    progress: Progress | None = None,
    resume: bool = False,
    retry_errors: bool = False,
    argv: list[str] | None = None,
    stop: asyncio.Event | None = None,
    allow_memory_overlap: bool = False,
) -> BenchOutcome:
    """Run every spec not already in ``out_dir/results.jsonl`` (infrastructure endings
    run again, and with ``retry_errors`` every ending with an error); return all
    results. Raises ``EndpointRefused`` when the endpoint refuses the run, and
    ``ConfigError`` when the memory holds an episode of the bench (unless
    ``allow_memory_overlap``: it is then flagged in the outcome and bench.json)."""
    progress = progress or LogProgress()
    overlap = [f"{k.task} seed {k.seed}" for k in check_memory_leak(
        settings, (task_key(s.task.id, s.seed) for s in specs), allow=allow_memory_overlap)]
    if overlap:
        log.warning("the memory holds episodes of this bench", episodes=overlap[:10],
                    count=len(overlap))
    settings = prepare_run(settings, [s.task for s in specs])
    # What the bench left undone when the disk refuses its trace (TraceWriteError).
    pending: list[EpisodeSpec] = list(specs)
    running: set[str] = set()
    finished: set[str] = set()
    try:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TraceWriteError.of(out_dir, exc) from exc
        check_manifest(out_dir, settings, resume, specs)
        write_manifest(out_dir, settings, specs, backend=backend, options=options,
                       argv=argv if argv is not None else sys.argv, memory_overlap=overlap)
        path = out_dir / RESULTS_FILE
        stopped: str | None = None
        try:
            with ResultsWriter(path) as writer:
                try:  # moving earlier endings and folders aside: file work in out_dir alone
                    retried = take_back_endings(out_dir, specs, retry_errors=retry_errors)
                    pending, skipped, recovered, moved = reconcile(out_dir, specs, writer,
                                                                   backend)
                except OSError as exc:
                    raise TraceWriteError.of(getattr(exc, "filename", None) or out_dir,
                                             exc) from exc
                stopped, budget = await _run_pending(
                    pending, settings, browser_config, out_dir, options, backend, writer,
                    progress, stop, running, finished, len(specs))
        except BaseException as exc:
            # Whatever ends the run, bench.json says so: the report reads why.
            reason, detail = _stop_of(exc)
            with contextlib.suppress(TraceWriteError, OSError, ValueError):
                record_end(out_dir, RunEnd(
                    reason=reason, detail=detail, ran=len(finished),
                    left=sum(1 for s in pending if str(s.key) not in finished)))
            raise
    except TraceWriteError as exc:
        raise exc.stopped_run(
            out_dir, cut_short=sorted(running), finished=len(finished),
            not_run=[str(s.key) for s in pending
                     if str(s.key) not in finished and str(s.key) not in running]) from exc
    not_started = sum(1 for s in pending if str(s.key) not in finished)
    budget_stop = budget.run_exceeded() if not_started else None
    if budget_stop is not None:
        log.warning("bench stopped by its run budget", reason=budget_stop,
                    not_started=not_started)
    end = RunEnd(reason="finished", ran=len(finished), left=not_started)
    if stopped is not None:
        end.reason, end.detail = "outage", stopped
    elif budget_stop is not None:
        end.reason, end.detail = "budget", budget_stop
    elif not_started and stop is not None and stop.is_set():
        end.reason = "interrupted"
        end.detail = "asked to stop (Ctrl+C, SIGTERM or SIGHUP) after the running steps"
    try:
        record_end(out_dir, end)
    except (TraceWriteError, OSError, ValueError) as exc:  # every result is recorded already
        log.warning("bench.json: the run's end not recorded", error=str(exc)[:300])
    return BenchOutcome(
        results=read_results(path), ran=len(pending) - not_started, recovered=recovered,
        skipped=skipped, set_aside=moved, budget_stop=budget_stop, not_started=not_started,
        retried=retried, stopped=stopped, memory_overlap=overlap,
    )


def _stop_of(exc: BaseException) -> tuple[StopReason, str]:
    """Why a run that raised ``exc`` stopped, for bench.json."""
    if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
        return "interrupted", ("stopped at once (a second Ctrl+C, or the grace period of "
                               "SIGTERM or SIGHUP ran out)")
    if isinstance(exc, EndpointRefused):
        return "refused", str(exc)
    if isinstance(exc, TraceWriteError):
        return "disk", str(exc)
    return "crashed", f"{type(exc).__name__}: {exc}"


async def _run_pending(
    pending: list[EpisodeSpec],
    settings: LinewiseSettings,
    browser_config: BrowserConfig,
    out_dir: Path,
    options: BenchOptions,
    backend: str,
    writer: ResultsWriter,
    progress: Progress,
    stop: asyncio.Event | None,
    running: set[str],
    finished: set[str],
    planned: int,
) -> tuple[str | None, Budget]:
    """Run the pending episodes on the chosen backend, each result line written as it
    comes; ``running`` and ``finished`` follow the episodes (by key). Returns why the
    bench stopped early (or None) and the run's budget."""
    progress.start(planned, planned - len(pending))
    stopped: str | None = None

    def on_start(spec: EpisodeSpec) -> None:
        running.add(str(spec.key))
        progress.episode_started(str(spec.key))

    # The bench's one budget: the backend's episodes charge it (the local backend's
    # step by step, the Ray backend's as each result comes back).
    budget = Budget.of(settings)

    def on_result(result: EpisodeResult) -> None:
        writer.append(result)
        running.discard(str(result.key))
        finished.add(str(result.key))
        progress.episode_finished(result)

    def on_retry(spec: EpisodeSpec, result: EpisodeResult) -> None:
        progress.episode_retried(result)

    try:
        if backend == "ray":
            from linewise.apps.bench.ray_backend import run_ray

            stopped = await run_ray(
                pending, settings, browser_config, out_dir, options, on_start, on_result,
                stop, on_retry=on_retry, on_outage=progress.endpoint_down, budget=budget,
            )
        else:
            stopped = await run_local(
                pending, settings, browser_config, out_dir, options, on_start, on_result,
                stop, on_retry=on_retry, on_outage=progress.endpoint_down, budget=budget,
            )
    finally:
        progress.close()
    return stopped, budget

