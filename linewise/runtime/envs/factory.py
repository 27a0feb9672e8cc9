"""Which environment runs a task: linewise's Chromium, or BrowserGym's gym env."""

from __future__ import annotations

from pathlib import Path

from linewise.runtime.browser.chromium import Browser
from linewise.runtime.browser.executor import SettleConfig
from linewise.runtime.envs.base import Environment
from linewise.runtime.envs.browsergym import BrowserGymEnv
from linewise.runtime.envs.chromium import ChromiumEnv
from linewise.runtime.tasks.browser_task import browser_task_for
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.runtime.tasks.schema import AnyTask, BrowserGymTask


def environment_for(
    task: AnyTask,
    browser: Browser,
    miniwob: MiniWoBServer | None = None,
    settle: SettleConfig | None = None,
    episode_dir: Path | None = None,
) -> Environment:
    """A fresh environment for one episode of ``task``.

    BrowserGym's own tasks run in its gym env (their set-up and validation are its own);
    its MiniWoB++ tasks read their pages from linewise's MiniWoB++ server when one runs.
    Every other task runs on ``browser``, under the navigation policy (downloads, when
    allowed, are saved in ``episode_dir``).
    """
    if isinstance(task, BrowserGymTask):
        task_kwargs = dict(task.task_kwargs)
        if task.family == "miniwob" and miniwob is not None:
            task_kwargs.setdefault("base_url", miniwob.base_url)
        return BrowserGymEnv(task, browser.config, task_kwargs)
    return ChromiumEnv(browser, browser_task_for(task, miniwob), settle, episode_dir)
