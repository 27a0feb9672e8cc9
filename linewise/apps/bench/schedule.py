"""Which episode runs when: the scheduling every backend shares.

A backend says how one episode runs (``EpisodeRun``: in this process, or as a Ray
task); ``run_scheduled`` decides when, the same way for all of them:

- at most ``concurrency`` episodes at once, in the order of the list;
- no new episode while the model endpoint is down (``EndpointWatch``, outage.py), and
  none once it has been down too long, or once the user asked to stop (first Ctrl+C),
  or once the run budget is spent;
- an episode the user stopped gets no results line (``--resume`` runs it again);
- an episode that ended on a passing infrastructure fault (``RERUN_IN_BENCH``) runs
  again, up to ``OutageSettings.infra_retries`` times, its partial trace set aside
  under ``_infra/``; the other infrastructure endings (a deadline, a bug) are recorded
  and left to ``--resume``, as running them again at once would most likely end the
  same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from linewise.apps.bench.outage import EndpointWatch, OutageHook, Probe
from linewise.apps.bench.plan import INFRA_DIR, EpisodeKey, EpisodeSpec, set_aside_unfinished
from linewise.apps.bench.results import EpisodeResult
from linewise.errors import EndpointRefused, TraceWriteError
from linewise.records import InfraKind
from linewise.runtime.budget import Budget
from linewise.settings import OutageSettings

log = structlog.get_logger(__name__)

EpisodeRun = Callable[[EpisodeSpec], Awaitable[EpisodeResult]]
"""Runs one episode to its end and returns its results line (never raises, except
``EndpointRefused``: no episode could run)."""
StartHook = Callable[[EpisodeSpec], None]
ResultHook = Callable[[EpisodeResult], None]
RetryHook = Callable[[EpisodeSpec, EpisodeResult], None]
"""An episode ended on an infrastructure fault and will run again (no results line)."""

RERUN_IN_BENCH: frozenset[InfraKind] = frozenset({"model", "browser", "server"})
"""Infrastructure kinds that pass: an episode ending on one runs again in the same bench."""


@dataclass
class SchedulerHooks:
    """What the driver is told as the bench goes."""

    on_start: StartHook
    on_result: ResultHook
    on_retry: RetryHook | None = None
    on_outage: OutageHook | None = None


async def run_scheduled(
    specs: list[EpisodeSpec],
    run_one: EpisodeRun,
    *,
    concurrency: int,
    outage: OutageSettings,
    probe: Probe | None,
    out_dir: Path,
    hooks: SchedulerHooks,
    stop: asyncio.Event | None = None,
    budget: Budget | None = None,
) -> str | None:
    """Run ``specs`` with ``run_one`` as the module says.

    Returns why the bench stopped before the end (the endpoint stayed down), or None.
    ``EndpointRefused`` from any episode (or from a probe) stops every other one and is
    raised.
    """
    queue: asyncio.Queue[EpisodeSpec] = asyncio.Queue()
    for spec in specs:
        queue.put_nowait(spec)
    watch = EndpointWatch(outage, probe, hooks.on_outage)
    retries: dict[EpisodeKey, int] = {}

    async def worker() -> None:
        while await watch.wait_until_up():
            if stop is not None and stop.is_set():
                return
            if budget is not None and budget.run_exceeded() is not None:
                return  # the run budget is spent: start no more episodes
            try:
                spec = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            hooks.on_start(spec)
            result = await run_one(spec)
            # An episode the user stopped gets no results line: --resume runs it again.
            if result.termination == "interrupted":
                continue
            watch.record(result)
            if (result.outcome == "infrastructure" and result.infra_kind in RERUN_IN_BENCH
                    and retries.get(spec.key, 0) < outage.infra_retries):
                retries[spec.key] = retries.get(spec.key, 0) + 1
                set_aside_unfinished(out_dir, [spec], INFRA_DIR)
                log.warning("episode ended on an infrastructure fault: it runs again",
                            episode=str(spec.key), infra_kind=result.infra_kind,
                            error=result.error)
                if hooks.on_retry is not None:
                    hooks.on_retry(spec, result)
                queue.put_nowait(spec)
                continue
            hooks.on_result(result)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(max(1, min(concurrency, len(specs)))):
                group.create_task(worker())
    except* EndpointRefused as refused:
        raise refused.exceptions[0] from None
    except* TraceWriteError as failed:  # the disk refused the trace: the bench stops
        raise failed.exceptions[0] from None
    finally:
        await watch.close()
    if watch.refused is not None:
        raise watch.refused
    if watch.gave_up:
        return (f"the model endpoint was down for longer than {outage.max_outage_s:g} s; "
                f"{queue.qsize()} episodes left to run")
    return None
