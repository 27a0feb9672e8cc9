"""BrowserGym's own ``browsergym/miniwob.*`` tasks in the bench: its sync env, one thread
per episode, its set-up and validation, our agent and trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from linewise.apps.bench.driver import run_bench
from linewise.apps.bench.local import BenchOptions
from linewise.apps.bench.plan import expand
from linewise.errors import ConfigError
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.envs.browsergym_gym import check_family
from linewise.runtime.tasks.schema import BrowserGymTask
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import ScriptedChatServer, miniwob_solver

pytest.importorskip("browsergym.miniwob", reason="pip install browsergym-miniwob")


@pytest.mark.slow
async def test_browsergym_miniwob_tasks_run_in_threads(tmp_path: Path) -> None:
    prompts: list[str] = []

    def script(messages: list[dict[str, Any]]) -> str:
        prompts.append(messages[1]["content"])
        return miniwob_solver(messages)

    tasks = [BrowserGymTask(browsergym="miniwob.click-test", seed=1, max_steps=3),
             BrowserGymTask(browsergym="miniwob.click-button", seed=2, max_steps=3)]
    specs = expand(tasks, ["none"], 1)
    with ScriptedChatServer(script) as llm:
        endpoint = EndpointSettings(base_url=llm.base_url, model="scripted")
        settings = LinewiseSettings(action=endpoint, retriever=endpoint, screenshots=False)
        outcome = await run_bench(specs, settings, BrowserConfig(), tmp_path,
                                  BenchOptions(concurrency=2, episode_timeout_s=120),
                                  argv=["test"])
    by_id = {r.task_id: r for r in outcome.results}
    assert set(by_id) == {"browsergym.miniwob.click-test.seed1",
                          "browsergym.miniwob.click-button.seed2"}
    for result in by_id.values():
        assert result.error is None, result.error
        assert result.success is True and result.reward > 0
        assert result.benchmark == "browsergym/miniwob" and result.n_steps == 1
        assert result.action_prompt_tokens > 0 and result.step_obs_tokens[0][0] > 0
        folder = tmp_path / result.episode_dir
        step = json.loads((folder / "steps.jsonl").read_text().splitlines()[0])
        assert step["axtree"].startswith("1|RootWebArea") and step["action"].startswith("click(")
        assert json.loads((folder / "summary.json").read_text())["status"] == "finished"
    assert any("Click on the" in p for p in prompts)  # the goal came from BrowserGym's task


def test_webarena_without_its_servers_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WA_SHOPPING", "WA_REDDIT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError) as info:
        check_family("webarena")
    message = str(info.value)
    assert "browsergym-webarena" in message or "WA_SHOPPING" in message
