"""One step loop over two environments: the same page reads the same to the model, and
hooks see every step at their four points."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from linewise.agent.action_parser import parse_action
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.envs.factory import environment_for
from linewise.runtime.episode import StepContext, StepHooks
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.tasks.miniwob import MiniWoBServer
from linewise.runtime.tasks.schema import BrowserGymTask, MiniWoBTask
from linewise.settings import EndpointSettings
from linewise.testing import ScriptedChatServer
from tests.support.episodes import resources_of, run_episode

_BID = re.compile(r"\[[A-Za-z0-9]+\] ")


def _without_bids(lines: list[str]) -> list[str]:
    return [_BID.sub("[] ", line) for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["click-link", "click-checkboxes", "enter-text"])
async def test_both_environments_show_the_model_the_same_page(
    name: str, browser: Browser, miniwob_server: MiniWoBServer
) -> None:
    pytest.importorskip("browsergym.miniwob", reason="pip install browsergym-miniwob")
    native = environment_for(MiniWoBTask(miniwob=name, seed=0), browser, miniwob_server)
    gym = environment_for(
        BrowserGymTask(browsergym=f"miniwob.{name}", seed=0), browser, miniwob_server
    )
    try:
        native_start, gym_start = await native.reset(), await gym.reset()
        native_obs = await native.observe(screenshot=False)
        gym_obs = await gym.observe(screenshot=False)
    finally:
        await native.close()
        await gym.close()
    assert native_start.goal == gym_start.goal
    # a MiniWoB++ task lives on one page, which only its own status ends, in both
    assert (native.single_page, gym.single_page) == (True, True)
    assert (native.agent_can_end, gym.agent_can_end) == (False, False)
    assert native_obs.url == gym_obs.url
    assert _without_bids(native_obs.lines) == _without_bids(gym_obs.lines)
    assert not any("InlineTextBox" in line for line in gym_obs.lines)
    if name == "click-link":  # the links are spans with click handlers: they need their ids
        links = [line for line in gym_obs.lines if line.strip().endswith("generic, clickable")]
        assert len(links) >= 3 and all(_BID.search(line) for line in links)


class _Recorder(StepHooks):
    """Records what each hook point saw; on step 0 replaces the model's action."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, Any]] = []

    async def before_observe(self, step: StepContext) -> None:
        self.seen.append(("before_observe", step.index, step.observation))

    async def after_filter(self, step: StepContext) -> None:
        assert step.observation is not None and step.filtered is not None
        self.seen.append(("after_filter", step.index, len(step.filtered.shown_bids)))

    async def before_act(self, step: StepContext) -> None:
        assert step.decision is not None
        self.seen.append(("before_act", step.index, str(step.action)))
        if step.index == 0:
            step.notes["replaced"] = str(step.action)
            step.action = parse_action("noop(10)")

    async def after_act(self, step: StepContext) -> None:
        assert step.outcome is not None
        self.seen.append(("after_act", step.index, step.outcome.error))


@pytest.mark.slow
async def test_hooks_see_each_step_and_may_replace_the_action(
    browser: Browser, miniwob_server: MiniWoBServer, tmp_path: Path
) -> None:
    answers = iter(["<action>click('999')</action>", "<action>click('998')</action>"])

    def script(messages: list[dict[str, Any]]) -> str:
        return next(answers)

    hooks = _Recorder()
    with ScriptedChatServer(script) as llm:
        model = ChatClient(EndpointSettings(base_url=llm.base_url, model="scripted"))
        resources = resources_of(browser, model, miniwob_server)
        task = MiniWoBTask(miniwob="click-test", seed=0, max_steps=2)
        summary = await run_episode(task, resources, tmp_path, hooks=[hooks])
        await model.close()
    assert summary.n_steps == 2
    points = [(point, index) for point, index, _ in hooks.seen]
    assert points == [(p, i) for i in (0, 1)
                      for p in ("before_observe", "after_filter", "before_act", "after_act")]
    steps = [json.loads(line) for line in
             (tmp_path / task.id / "steps.jsonl").read_text().splitlines()]
    # step 0: the hook's action ran, the model's is kept in the record's notes
    assert steps[0]["action"] == "noop(10.0)" and steps[0]["action_error"] is None
    assert steps[0]["hook_notes"] == {"replaced": "click('999')"}
    # step 1: the model's own action ran and failed on an unknown element
    assert steps[1]["action"] == "click('998')" and "998" in steps[1]["action_error"]
