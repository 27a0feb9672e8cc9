"""Tasks that run on linewise's own Chromium: how each kind is set up, followed and judged.

Like BrowserGym's ``AbstractBrowserTask``, a task sets itself up on a fresh page and says
how the episode stands; the Chromium environment calls these and never asks which kind
of task it runs. A web task opens its URL and is judged at the end by its success check;
a MiniWoB++ task starts a seeded episode on the local server and reports the page's own
reward and done flag after every action.
"""

from __future__ import annotations

from typing import Protocol

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from pydantic import BaseModel, ConfigDict

from linewise.errors import BrowserError, ConfigError
from linewise.runtime.tasks.miniwob import (
    MiniWoBServer,
    read_miniwob_status,
    start_miniwob_episode,
)
from linewise.runtime.tasks.schema import MiniWoBTask, Task, WebTask

FINAL_TEXT_TIMEOUT_MS = 5000
"""How long the success check waits for the final page's text."""


class TaskStart(BaseModel):
    """What ``reset`` tells the loop about the task it set up."""

    model_config = ConfigDict(frozen=True)

    goal: str
    start_url: str


class TaskStatus(BaseModel):
    """Where the task stands after an action."""

    model_config = ConfigDict(frozen=True)

    reward: float = 0.0
    done: bool = False
    """The task itself ended the episode (solved, failed, or its page left)."""


class BrowserTask(Protocol):
    """One task's behaviour on a Chromium page."""

    agent_can_end: bool
    """Whether the agent's message to the user (or its infeasibility report) ends it."""
    start_url: str
    """Where the task starts; the navigation policy derives what it implies."""
    allowed_domains: tuple[str, ...]
    blocked_domains: tuple[str, ...]

    async def setup(self, page: Page) -> TaskStart: ...

    async def status(self, page: Page) -> TaskStatus: ...

    async def judge(self, page: Page, answer: str | None, reward: float) -> bool | None: ...


class WebBrowserTask:
    """A goal on any site: open its URL; success is its check on the final page."""

    agent_can_end = True

    def __init__(self, task: WebTask) -> None:
        self.task = task
        self.start_url = task.url
        self.allowed_domains = task.allowed_domains
        self.blocked_domains = task.blocked_domains

    async def setup(self, page: Page) -> TaskStart:
        try:
            await page.goto(self.task.url)
        except PlaywrightError as exc:
            raise BrowserError(
                f"Could not open {self.task.url}: {exc.message.splitlines()[0]}"
            ) from exc
        return TaskStart(goal=self.task.goal, start_url=self.task.url)

    async def status(self, page: Page) -> TaskStatus:
        return TaskStatus()

    async def judge(self, page: Page, answer: str | None, reward: float) -> bool | None:
        if self.task.success is None:
            return None
        try:
            page_text = await page.inner_text("body", timeout=FINAL_TEXT_TIMEOUT_MS)
        except PlaywrightError:
            page_text = ""
        return self.task.success.evaluate(page.url, page_text, answer)


class MiniWoBBrowserTask:
    """A seeded MiniWoB++ episode: the page's reward and done flag decide."""

    agent_can_end = False

    def __init__(self, task: MiniWoBTask, server: MiniWoBServer) -> None:
        self.task = task
        self.server = server
        self.start_url = server.url_for(task.miniwob)
        self.allowed_domains: tuple[str, ...] = ()
        self.blocked_domains: tuple[str, ...] = ()

    async def setup(self, page: Page) -> TaskStart:
        goal = await start_miniwob_episode(page, self.task.miniwob, self.task.seed, self.server)
        return TaskStart(goal=goal, start_url=self.server.url_for(self.task.miniwob))

    async def status(self, page: Page) -> TaskStatus:
        status = await read_miniwob_status(page)
        return TaskStatus(reward=status.reward, done=status.done)

    async def judge(self, page: Page, answer: str | None, reward: float) -> bool | None:
        return reward > 0


def browser_task_for(task: Task, miniwob: MiniWoBServer | None) -> BrowserTask:
    """The behaviour of ``task`` on linewise's Chromium."""
    if task.kind == "miniwob":
        assert isinstance(task, MiniWoBTask)
        if miniwob is None:
            raise ConfigError(f"task {task.id} is a MiniWoB++ task but no MiniWoB++ server runs")
        return MiniWoBBrowserTask(task, miniwob)
    assert isinstance(task, WebTask)
    return WebBrowserTask(task)
