"""BrowserGym's env runs its own copy of each action: before a task starts, the backend
checks that BrowserGym has every action linewise offers the task, taking the arguments
linewise's does, and refuses to start naming the first that disagrees."""

from __future__ import annotations

from typing import Any

import pytest

from linewise.agent.actions import ActionSet
from linewise.errors import ConfigError
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.envs.browsergym import BrowserGymEnv
from linewise.runtime.envs.browsergym_gym import check_actions
from linewise.runtime.tasks.schema import BrowserGymTask
from linewise.settings import BrowserSettings, NavigationSettings

pytest.importorskip("browsergym.core", reason="pip install browsergym-core")
from browsergym.core.action.highlevel import HighLevelActionSet

TASKS = [
    BrowserGymTask(id="open", browsergym="openended",
                   task_kwargs={"start_url": "http://127.0.0.1:9/", "goal": "Look."}),
    BrowserGymTask(id="mini", browsergym="miniwob.click-test"),
]


def _env(task: BrowserGymTask) -> BrowserGymEnv:
    config = BrowserConfig.from_settings(
        BrowserSettings(navigation=NavigationSettings(enforce=False)))
    return BrowserGymEnv(task, config, dict(task.task_kwargs))


def _browsergym(*functions: Any) -> Any:
    """BrowserGym's own action set, of ``functions`` (and its ``noop``, always there)."""
    return HighLevelActionSet(subsets=["custom"], custom_actions=list(functions))


async def test_browsergym_runs_every_action_linewise_offers_its_tasks() -> None:
    browsergym = HighLevelActionSet()  # what BrowserGym's env maps actions with
    check_actions(ActionSet.standard(), browsergym)
    for task in TASKS:
        env = _env(task)
        try:
            assert "run_skill" not in env.actions  # the episode runs a skill itself
            check_actions(env.actions, browsergym)
        finally:
            await env.close()


def test_an_action_browsergym_lacks_or_takes_otherwise_is_named() -> None:
    def click(element: str, button: str = "left") -> None:
        """
        Click an element.

        Examples:
            click('12')
        """

    def press(bid: str, key_comb: str, delay: float) -> None:
        """
        Press keys.

        Examples:
            press('12', 'Enter', 10)
        """

    def dblclick(bid: str, button: str, modifiers: list[str]) -> None:
        """
        Double click an element.

        Examples:
            dblclick('12', 'left', [])
        """

    def fill(bid: str) -> None:
        """
        Fill a field.

        Examples:
            fill('12')
        """

    browsergym = _browsergym(click, press, dblclick, fill)
    check_actions(ActionSet(["noop"]), browsergym)
    cases = {
        "hover": "BrowserGym's action set has no action 'hover'",
        "click": "'click' disagrees with BrowserGym's: parameter 1 is 'bid' here, 'element'",
        "press": "'press' disagrees with BrowserGym's: BrowserGym's also requires 'delay'",
        "dblclick": "'dblclick' disagrees with BrowserGym's: 'button' may be left out here, "
                    "not in BrowserGym's",
        "fill": "'fill' disagrees with BrowserGym's: BrowserGym's takes no parameter 'value'",
    }
    for name, problem in cases.items():
        with pytest.raises(ConfigError) as raised:
            check_actions(ActionSet(["noop", name]), browsergym)
        assert problem in str(raised.value)
    # the message shows both signatures
    with pytest.raises(ConfigError, match=r"linewise: click\(bid: str.*BrowserGym: click\(elem"):
        check_actions(ActionSet(["click"]), browsergym)


async def test_a_task_offering_an_action_browsergym_lacks_does_not_start() -> None:
    env = _env(TASKS[0])
    env.actions = ActionSet([*env.actions, "run_skill"])
    try:
        with pytest.raises(ConfigError, match="no action 'run_skill'"):
            await env.reset()
    finally:
        await env.close()
