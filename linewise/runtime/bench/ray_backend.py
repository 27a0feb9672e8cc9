"""The Ray backend: the same episodes as Ray tasks, for benches one machine cannot hold.

``--backend ray`` joins the cluster at ``RAY_ADDRESS`` (``ray start --head`` on one
machine, ``ray start --address …`` on the others), or starts a small local instance
(2 CPUs, no dashboard) when it is unset. Each episode is one Ray task that opens its
own Chromium, MiniWoB server and model clients, runs the episode exactly as the local
backend does (``EpisodeRunner``) and returns its results line to the driver, which
stays the only writer of ``results.jsonl``. At most ``--concurrency`` tasks are in
flight, so resume and progress work as they do locally.

Requirements on a cluster: every node has linewise and Chromium installed, ``--out``
is on a file system every node sees (the traces are written by the workers), and the
model endpoint is reachable from every node. The embedded model is started once on the
driver, so with it the workers must be on the driver's machine.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import structlog

from linewise.errors import ConfigError
from linewise.runtime.bench.local import BenchOptions, ResultHook, StartHook, open_runner
from linewise.runtime.bench.plan import EpisodeSpec
from linewise.runtime.bench.results import EpisodeResult, failed_result
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.run import open_models
from linewise.settings import LinewiseSettings

log = structlog.get_logger(__name__)

CPUS_PER_EPISODE = 0.5
"""An episode mostly waits for the model: two share a CPU."""
LOCAL_CPUS = 2


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            "--backend ray needs Ray: pip install 'linewise[ray]' (or pip install ray)"
        ) from exc
    return ray


def _episode_task(
    spec: EpisodeSpec,
    settings: dict[str, Any],
    browser_config: BrowserConfig,
    out_dir: str,
    options: BenchOptions,
) -> EpisodeResult:
    """Runs on a Ray worker: one episode on resources of its own."""
    endpoint_settings = LinewiseSettings.model_validate(settings)

    async def run() -> EpisodeResult:
        try:
            async with open_runner([spec], endpoint_settings, browser_config, Path(out_dir),
                                   options, backend="ray") as runner:
                return await runner.run(spec)
        except Exception as exc:  # resources that would not open: a result, not a crash
            return failed_result(spec, "crash", f"{type(exc).__name__}: {exc}",
                                 agent=endpoint_settings.action.model or "", backend="ray")

    return asyncio.run(run())


async def run_ray(
    specs: list[EpisodeSpec],
    settings: LinewiseSettings,
    browser_config: BrowserConfig,
    out_dir: Path,
    options: BenchOptions,
    on_start: StartHook,
    on_result: ResultHook,
) -> None:
    if not specs:
        return
    ray = _import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        address = os.environ.get("RAY_ADDRESS") or None
        extra: dict[str, Any] = {} if address else {"num_cpus": LOCAL_CPUS}
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, **extra)
        log.info("ray started", address=address or "local", resources=ray.cluster_resources())
    try:
        # The clients are opened here once: this starts the embedded model if no endpoint
        # is configured, and checks every endpoint before any worker starts.
        async with open_models(settings) as (action, retriever):
            resolved = settings.model_copy(update={
                "action": action.endpoint, "retriever": retriever.endpoint,
            }).model_dump(mode="json")
            remote = ray.remote(num_cpus=CPUS_PER_EPISODE, max_retries=0)(_episode_task)
            await _drive(ray, remote, specs, resolved, browser_config, out_dir.resolve(),
                         options, on_start, on_result, agent=action.model)
    finally:
        if started_here:
            ray.shutdown()


async def _drive(
    ray: Any, remote: Any, specs: list[EpisodeSpec], settings: dict[str, Any],
    browser_config: BrowserConfig, out_dir: Path, options: BenchOptions,
    on_start: StartHook, on_result: ResultHook, *, agent: str,
) -> None:
    """Keep ``concurrency`` tasks in flight; hand each result over as it arrives."""
    queue = list(reversed(specs))
    running: dict[asyncio.Future[Any], EpisodeSpec] = {}
    while queue or running:
        while queue and len(running) < options.concurrency:
            spec = queue.pop()
            ref = remote.remote(spec, settings, browser_config, str(out_dir), options)
            running[asyncio.wrap_future(ref.future())] = spec
            on_start(spec)
        done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        for future in done:
            spec = running.pop(future)
            try:
                result = future.result()
            except Exception as exc:  # the worker died (OOM, node lost): record it
                log.warning("ray task failed", episode=str(spec.key), error=str(exc)[:300])
                result = failed_result(spec, "crash", f"{type(exc).__name__}: {exc}"[:2000],
                                       agent=agent, backend="ray")
            on_result(result)
