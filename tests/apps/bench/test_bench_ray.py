"""``linewise bench --backend ray`` on a small local Ray instance (2 CPUs, no dashboard):
its episodes, an endpoint outage (the bench pauses as with the local backend) and the
stop flag (first Ctrl+C)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from linewise.apps.bench.driver import run_bench
from linewise.apps.bench.local import BenchOptions
from linewise.apps.bench.plan import INFRA_DIR, expand
from linewise.apps.bench.ray_backend import LOCAL_CPUS, STOP_FILE
from linewise.apps.bench.results import read_results
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.tasks.schema import MiniWoBTask
from linewise.runtime.trace import read_summary
from linewise.settings import EndpointSettings, LinewiseSettings, OutageSettings
from linewise.testing import Fault, ScriptedChatServer, miniwob_solver
from tests.support.bench import RecordingProgress

# Benches end to end on a Ray cluster. Under pytest-xdist the module runs on one worker
# (``--dist loadscope``): its tests share one local instance, and two at once would
# compete for the same CPUs.
pytestmark = pytest.mark.slow

pytest.importorskip("ray", reason="Ray is not installed: pip install 'linewise[ray]'")


async def test_ray_backend_runs_episodes_as_ray_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    tasks = [MiniWoBTask(miniwob="click-test", seed=1, max_steps=3),
             MiniWoBTask(miniwob="enter-text", seed=0, max_steps=3)]
    specs = expand(tasks, ["none", "truncate"], 1)
    with ScriptedChatServer(miniwob_solver) as llm:
        endpoint = EndpointSettings(base_url=llm.base_url, model="scripted")
        settings = LinewiseSettings(action=endpoint, retriever=endpoint, screenshots=False)
        outcome = await run_bench(
            specs, settings, BrowserConfig(), tmp_path, BenchOptions(concurrency=2),
            backend="ray", argv=["test"],
        )
    assert outcome.ran == 4
    assert sorted(r.key for r in outcome.results) == sorted(s.key for s in specs)
    assert all(r.success and r.backend == "ray" for r in outcome.results), outcome.results
    for r in outcome.results:  # the workers wrote the traces into the bench folder
        assert (tmp_path / r.episode_dir / "summary.json").exists()
    import ray

    assert not ray.is_initialized(), "the local instance the bench started is shut down"


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    """One local instance for the tests after the first (which checks that a bench starts
    and shuts down its own): Ray's start, and its workers' imports, are paid once."""
    import ray

    ray.init(address="local", num_cpus=LOCAL_CPUS, include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _settings(base_url: str) -> LinewiseSettings:
    endpoint = EndpointSettings(base_url=base_url, model="scripted", retry_budget_s=1.0,
                                backoff_initial_s=0.1, backoff_max_s=0.4, timeout_s=5.0)
    outage = OutageSettings(failures_to_pause=1, probe_initial_s=1.0, probe_max_s=2.0)
    return LinewiseSettings(action=endpoint, retriever=endpoint, screenshots=False,
                            outage=outage)


@pytest.mark.usefixtures("ray_instance")
async def test_ray_backend_pauses_during_an_outage_and_reruns_its_endings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers' episodes end on the outage; the driver pauses, probes the endpoint,
    carries on when it is back and runs those episodes again."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    specs = expand([MiniWoBTask(miniwob="click-test", seed=0, max_steps=3)], ["none"], 3)
    llm = ScriptedChatServer(miniwob_solver)

    def down_at_second_call(number: int, messages: list[dict[str, Any]]) -> Fault | None:
        if number == 2:
            llm.down_for(4.0)  # this request is dropped, the port refuses connections
        return None

    llm.schedule = down_at_second_call
    progress = RecordingProgress()
    with llm:
        outcome = await run_bench(specs, _settings(llm.base_url), BrowserConfig(), tmp_path,
                                  BenchOptions(concurrency=2), backend="ray",
                                  progress=progress, argv=["test"])
    assert outcome.stopped is None
    down = [n for n in progress.notices if n is not None]
    assert down and "model endpoint down since" in down[0].text()
    assert progress.notices[-1] is None  # the pause was lifted
    assert progress.retried and {r.infra_kind for r in progress.retried} == {"model"}
    results = read_results(tmp_path / "results.jsonl")
    assert sorted(r.key for r in results) == sorted(s.key for s in specs)  # once each
    assert all(r.outcome == "agent" and r.success and r.backend == "ray" for r in results), [
        (r.task_id, r.seed, r.outcome, r.infra_kind, r.termination, r.error) for r in results]
    assert any((tmp_path / INFRA_DIR).rglob("summary.json"))  # the failed tries, set aside


@pytest.mark.usefixtures("ray_instance")
async def test_ray_backend_stops_after_the_current_step_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first Ctrl+C (the stop flag) reaches the Ray workers: their episodes end after
    their step, written as stopped, with no results line; no other episode starts."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    specs = expand([MiniWoBTask(miniwob="click-test", seed=0, max_steps=40)], ["none"], 3)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def wait_forever(messages: list[dict[str, Any]]) -> str:
        return "<think>Wait.</think><action>noop(100)</action>"

    def stop_at_fourth_call(number: int, messages: list[dict[str, Any]]) -> Fault | None:
        if number == 4:
            loop.call_soon_threadsafe(stop.set)
        return None

    with ScriptedChatServer(wait_forever, schedule=stop_at_fourth_call) as llm:
        outcome = await run_bench(specs, _settings(llm.base_url), BrowserConfig(), tmp_path,
                                  BenchOptions(concurrency=2), backend="ray",
                                  argv=["test"], stop=stop)
        calls = len(llm.requests)
    assert stop.is_set()
    assert read_results(tmp_path / "results.jsonl") == []
    assert outcome.ran == 0 and outcome.not_started == 3
    summaries = [read_summary(p.parent) for p in tmp_path.rglob("summary.json")]
    assert len(summaries) == 2, summaries  # the third episode never started
    assert all(s.status == "stopped" and s.termination == "interrupted" for s in summaries)
    assert all(s.n_steps < 20 for s in summaries), [s.n_steps for s in summaries]
    assert calls < 40
    assert not (tmp_path / STOP_FILE).exists()
