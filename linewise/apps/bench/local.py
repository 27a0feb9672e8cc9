"""The local backend: one Chromium, N episodes at once on one asyncio loop.

Every episode opens its own browser context (``Browser.new_session``), so concurrent
episodes share the Chromium process but nothing else. The model clients are shared too:
their semaphore and throttle bound requests in flight and per second per endpoint,
independently of how many episodes run (``--max-in-flight``, ``--rps``).

Failure isolation: the step loop already turns page, model and task trouble into a
recorded failure. ``EpisodeRunner`` adds the two things it cannot do for itself: a hard
wall-clock guard (the episode's own timeout plus a grace period for closing its
context) and a catch-all for bugs, so one bad episode is a results line, never a
stopped bench. Only ``EndpointRefused`` (no episode could run) and ``TraceWriteError``
(no episode could be recorded) stop it.

When episodes start, run again after an infrastructure fault, or stop (an outage, the
stop flag, the run budget) is ``run_scheduled``'s (schedule.py), shared with the Ray
backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import structlog

from linewise.agent.models import ChatModel
from linewise.apps.bench.options import BenchOptions
from linewise.apps.bench.outage import OutageHook, Probe
from linewise.apps.bench.plan import EpisodeSpec, set_aside_unfinished
from linewise.apps.bench.results import EpisodeResult, failed_result, result_from_summary
from linewise.apps.bench.schedule import (
    ResultHook,
    RetryHook,
    SchedulerHooks,
    StartHook,
    run_scheduled,
)
from linewise.errors import EndpointRefused, TraceWriteError, infra_kind_of
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.budget import Budget
from linewise.runtime.filter_choice import ResolvedFilter, resolve_filter
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.run import EpisodeFactory, RunResources, open_run_resources
from linewise.runtime.trace import read_steps
from linewise.settings import LinewiseSettings

log = structlog.get_logger(__name__)

class EpisodeRunner:
    """Runs one spec on shared resources and always returns its results line."""

    def __init__(
        self,
        settings: LinewiseSettings,
        resources: RunResources,
        out_dir: Path,
        options: BenchOptions,
        filters: list[ResolvedFilter],
        *,
        backend: str = "local",
        budget: Budget | None = None,
    ) -> None:
        self.settings = settings
        self.resources = resources
        self.out_dir = out_dir
        self.options = options
        self.backend = backend
        self.episodes = EpisodeFactory(settings, resources, filters,
                                       timeout_s=options.episode_timeout_s, budget=budget)

    @property
    def stop(self) -> asyncio.Event | None:
        """Set (first Ctrl+C): running episodes end after their step, no new one starts."""
        return self.episodes.stop

    @stop.setter
    def stop(self, event: asyncio.Event | None) -> None:
        self.episodes.stop = event

    @property
    def agent(self) -> str:
        return self.resources.action_client.model

    async def run(self, spec: EpisodeSpec) -> EpisodeResult:
        folder = spec.folder(self.out_dir)
        if folder.exists():  # never mix two runs' traces in one folder
            set_aside_unfinished(self.out_dir, [spec])
        folder.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        limit = self.options.episode_timeout_s + self.options.close_grace_s
        try:
            async with asyncio.timeout(limit):
                summary = await self.episodes.run(spec.task, folder, spec.filter)
            steps = read_steps(folder) if (folder / "steps.jsonl").exists() else []
            return result_from_summary(spec, summary, steps, backend=self.backend)
        except (EndpointRefused, TraceWriteError):  # the bench stops
            raise
        except TimeoutError:
            message = f"episode did not end within {limit:.0f} s (timeout + close grace)"
            log.warning("episode abandoned", episode=str(spec.key), error=message)
            return failed_result(spec, "timeout", message, agent=self.agent,
                                 backend=self.backend, wall_s=time.perf_counter() - started)
        except Exception as exc:  # a bug in one episode must not stop the bench
            log.exception("episode crashed", episode=str(spec.key))
            return failed_result(spec, infra_kind_of(exc), f"{type(exc).__name__}: {exc}",
                                 agent=self.agent, backend=self.backend,
                                 wall_s=time.perf_counter() - started)


@contextlib.asynccontextmanager
async def open_runner(
    specs: list[EpisodeSpec],
    settings: LinewiseSettings,
    browser_config: BrowserConfig,
    out_dir: Path,
    options: BenchOptions,
    *,
    backend: str = "local",
    budget: Budget | None = None,
) -> AsyncIterator[EpisodeRunner]:
    """The shared resources the specs need, and a runner on them (its episodes charge
    ``budget``, the run's; a budget of its own from the settings when not given)."""
    filters = [resolve_filter(name) for name in sorted({s.filter for s in specs})]
    async with open_run_resources(
        settings, [s.task for s in specs], browser_config,
        need_retriever=any(f.needs_retriever(settings.filter, endpoint_opened=True)
                           for f in filters),
    ) as resources:
        yield EpisodeRunner(settings, resources, out_dir, options, filters, backend=backend,
                            budget=budget)


def endpoint_probe(models: list[ChatModel | None]) -> Probe | None:
    """A probe of every distinct endpoint among ``models`` (None when none is one)."""
    clients = list({id(m): m for m in models if isinstance(m, ChatClient)}.values())
    if not clients:
        return None

    async def probe() -> None:
        for client in clients:
            await client.probe()

    return probe


async def run_specs(
    runner: EpisodeRunner,
    specs: list[EpisodeSpec],
    concurrency: int,
    hooks: SchedulerHooks,
) -> str | None:
    """Run ``specs`` on the runner's shared resources (``run_scheduled``). Returns why
    the bench stopped before the end, or None; raises ``EndpointRefused``."""
    resources = runner.resources
    return await run_scheduled(
        specs, runner.run, concurrency=concurrency, outage=runner.settings.outage,
        probe=endpoint_probe([resources.action_client, resources.retriever_client]),
        out_dir=runner.out_dir, hooks=hooks, stop=runner.stop,
        budget=runner.episodes.budget,
    )


async def run_local(
    specs: list[EpisodeSpec],
    settings: LinewiseSettings,
    browser_config: BrowserConfig,
    out_dir: Path,
    options: BenchOptions,
    on_start: StartHook,
    on_result: ResultHook,
    stop: asyncio.Event | None = None,
    *,
    on_retry: RetryHook | None = None,
    on_outage: OutageHook | None = None,
    budget: Budget | None = None,
) -> str | None:
    """The local backend: open the resources once, run every spec, close them; its
    episodes charge ``budget``, the bench's, step by step. Returns why it stopped early,
    or None (see ``run_specs``)."""
    if not specs:
        return None
    async with open_runner(specs, settings, browser_config, out_dir, options,
                           budget=budget) as runner:
        runner.stop = stop
        hooks = SchedulerHooks(on_start, on_result, on_retry, on_outage)
        return await run_specs(runner, specs, options.concurrency, hooks)
