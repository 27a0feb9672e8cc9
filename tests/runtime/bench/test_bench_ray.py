"""``linewise bench --backend ray`` on a small local Ray instance (2 CPUs, no dashboard)."""

from __future__ import annotations

from pathlib import Path

import pytest

from linewise.runtime.bench.driver import run_bench
from linewise.runtime.bench.local import BenchOptions
from linewise.runtime.bench.plan import expand
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.tasks.schema import MiniWoBTask
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import ScriptedChatServer, miniwob_solver

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
