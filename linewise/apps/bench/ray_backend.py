"""The Ray backend: the same episodes as Ray tasks, for benches one machine cannot hold.

``--backend ray`` joins the cluster at ``RAY_ADDRESS`` (``ray start --head`` on one
machine, ``ray start --address …`` on the others), or starts a small local instance
(2 CPUs, no dashboard) when it is unset. Each episode is one Ray task that opens its
own Chromium, MiniWoB server and model clients, runs the episode exactly as the local
backend does (``EpisodeRunner``) and returns its results line to the driver, which
stays the only writer of ``results.jsonl``. At most ``--concurrency`` tasks are in
flight, so resume and progress work as they do locally.

When episodes start is decided on the driver exactly as for the local backend
(``run_scheduled``): a model endpoint outage pauses the bench (the driver probes the
endpoint), infrastructure endings run again, and the first Ctrl+C starts no new
episode. The running ones hear of that stop through a file in the bench folder
(``STOP_FILE``, which every worker sees) and end after their current step; the second
Ctrl+C cancels their Ray tasks.

Requirements on a cluster: every node has linewise and Chromium installed, ``--out``
is on a file system every node sees (the traces are written by the workers), and the
model endpoint is reachable from every node. The embedded model is started once on the
driver, so with it the workers must be on the driver's machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import structlog

from linewise.apps.bench.local import endpoint_probe, open_runner
from linewise.apps.bench.metrics import episode_cost
from linewise.apps.bench.options import BenchOptions
from linewise.apps.bench.outage import OutageHook
from linewise.apps.bench.plan import EpisodeSpec
from linewise.apps.bench.results import EpisodeResult, failed_result
from linewise.apps.bench.schedule import (
    EpisodeRun,
    ResultHook,
    RetryHook,
    SchedulerHooks,
    StartHook,
    run_scheduled,
)
from linewise.errors import ConfigError, EndpointRefused, infra_kind_of
from linewise.runtime import secret_env
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.budget import Budget
from linewise.runtime.models.factory import open_models
from linewise.settings import LinewiseSettings

log = structlog.get_logger(__name__)

CPUS_PER_EPISODE = 0.5
"""An episode mostly waits for the model: two share a CPU."""
LOCAL_CPUS = 2
STOP_FILE = ".stop"
"""In the bench folder while the bench is stopping (first Ctrl+C): workers poll it."""
STOP_POLL_S = 0.25


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            "--backend ray needs Ray: pip install 'linewise[ray]' (or pip install ray)"
        ) from exc
    return ray


async def _stop_when_file_appears(path: Path, stop: asyncio.Event) -> None:
    while not path.exists():
        await asyncio.sleep(STOP_POLL_S)
    stop.set()


def _episode_task(
    spec: EpisodeSpec,
    settings: dict[str, Any],
    browser_config: BrowserConfig,
    out_dir: str,
    options: BenchOptions,
    secret_values: dict[str, str] | None = None,
) -> EpisodeResult:
    """Runs on a Ray worker: one episode on resources of its own. ``secret_values``: the
    values the driver keeps by variable name (a goal's ``{{secret:…}}`` is in no
    environment a worker could inherit)."""
    secret_env.remember_all(secret_values or {})
    endpoint_settings = LinewiseSettings.model_validate(settings)

    async def run() -> EpisodeResult:
        stop = asyncio.Event()
        watcher = asyncio.ensure_future(_stop_when_file_appears(Path(out_dir) / STOP_FILE, stop))
        try:
            async with open_runner([spec], endpoint_settings, browser_config, Path(out_dir),
                                   options, backend="ray") as runner:
                runner.stop = stop
                return await runner.run(spec)
        except EndpointRefused:
            raise  # the driver stops the bench
        except Exception as exc:  # resources that would not open: a result, not a crash
            # e.g. the endpoint is down when the worker opens its clients: a model
            # ending, which runs again once the endpoint is back, not a bug
            error = f"{type(exc).__name__}: {exc}"
            return failed_result(spec, infra_kind_of(exc), error,
                                 agent=endpoint_settings.action.model or "", backend="ray")
        finally:
            watcher.cancel()

    return asyncio.run(run())


async def run_ray(
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
    """The Ray backend (see the module); ``budget``, the bench's, is charged as each
    result comes back. Returns why it stopped early, or None."""
    if not specs:
        return None
    ray = _import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        address = os.environ.get("RAY_ADDRESS") or None
        extra: dict[str, Any] = {} if address else {"num_cpus": LOCAL_CPUS}
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, **extra)
        log.info("ray started", address=address or "local", resources=ray.cluster_resources())
    stop_file = out_dir.resolve() / STOP_FILE
    stop_file.unlink(missing_ok=True)  # left by a bench killed while it stopped
    stopping = asyncio.ensure_future(_touch_when_set(stop, stop_file)) if stop else None
    try:
        # The clients are opened here once: this starts the embedded model if no endpoint
        # is configured, checks every endpoint before any worker starts, and probes them
        # during an outage.
        async with open_models(settings) as (action, retriever):
            resolved = settings.model_copy(update={
                "action": action.endpoint, "retriever": retriever.endpoint,
            }).model_dump(mode="json")
            remote = ray.remote(num_cpus=CPUS_PER_EPISODE, max_retries=0)(_episode_task)

            def submit(spec: EpisodeSpec) -> Any:
                return remote.remote(spec, resolved, browser_config, str(out_dir.resolve()),
                                     options, secret_env.kept())

            run_budget = budget if budget is not None else Budget.of(settings)

            def recorded(result: EpisodeResult) -> None:
                # the workers' episodes charge budgets of their own, in their processes:
                # the run's is charged here, once per result
                run_budget.run.add(result.action_tokens + result.retriever_tokens,
                                   episode_cost(run_budget.prices, result))
                on_result(result)

            return await run_scheduled(
                specs, _ray_episode(ray, submit, agent=action.model),
                concurrency=options.concurrency, outage=settings.outage,
                probe=endpoint_probe([action, retriever]), out_dir=out_dir,
                hooks=SchedulerHooks(on_start, recorded, on_retry, on_outage),
                stop=stop, budget=run_budget,
            )
    finally:
        if stopping is not None:
            stopping.cancel()
        stop_file.unlink(missing_ok=True)
        if started_here:
            ray.shutdown()


async def _touch_when_set(stop: asyncio.Event, path: Path) -> None:
    await stop.wait()
    path.touch()


def _ray_episode(ray: Any, submit: Any, *, agent: str) -> EpisodeRun:
    """One episode as one Ray task; a task that dies (OOM, node lost) is a results line."""

    async def run_one(spec: EpisodeSpec) -> EpisodeResult:
        ref = submit(spec)
        try:
            result: EpisodeResult = await asyncio.wrap_future(ref.future())
            return result
        except asyncio.CancelledError:  # stopped at once (second Ctrl+C)
            with contextlib.suppress(Exception):
                ray.cancel(ref)
            raise
        except Exception as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, EndpointRefused):
                raise cause from None
            log.warning("ray task failed", episode=str(spec.key), error=str(exc)[:300])
            return failed_result(spec, "crash", f"{type(exc).__name__}: {exc}"[:2000],
                                 agent=agent, backend="ray")

    return run_one
