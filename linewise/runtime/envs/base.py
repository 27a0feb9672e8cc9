"""The environment contract the step loop runs on, in the spirit of BrowserGym's reset/step.

An environment owns one episode's browser and task: ``reset`` sets the task up and gives
its goal, ``observe`` reads the page into an ``Observation`` (the same flattening for every
environment), ``act`` runs one parsed action, ``status`` says whether the task has ended
and with what reward, and ``judge`` decides success once the loop is over. The loop in
``runtime/episode.py`` knows nothing else about where the page comes from.
"""

from __future__ import annotations

from typing import Protocol

from linewise.agent.action_parser import ParsedAction
from linewise.records import NavigationEvents
from linewise.runtime.browser.executor import ActionOutcome
from linewise.runtime.browser.observation import Observation
from linewise.runtime.tasks.browser_task import TaskStart, TaskStatus


class Environment(Protocol):
    """One episode's world. Every method may raise ``LinewiseError`` subclasses (a page
    that cannot be read, a task that cannot start); the loop records them."""

    @property
    def agent_can_end(self) -> bool:
        """Whether ``send_msg_to_user`` and ``report_infeasible`` end the episode here
        (web tasks), or only the task's own status does (MiniWoB++, BrowserGym's tasks)."""
        ...

    async def reset(self) -> TaskStart: ...

    async def observe(self, *, screenshot: bool) -> Observation: ...

    async def act(self, action: ParsedAction) -> ActionOutcome: ...

    async def status(self) -> TaskStatus: ...

    async def judge(self, answer: str | None, reward: float) -> bool | None:
        """Success once the loop is over, given the agent's last message and the last
        reward; None when the task has no way to tell."""
        ...

    async def page_changed(self) -> None:
        """The page changed outside ``act`` (a person worked in it): the next ``observe``
        must read it afresh, not reuse what an action read."""
        ...

    def take_navigation_events(self) -> NavigationEvents:
        """Page loads the navigation policy refused, and downloads, since the last call."""
        ...

    async def close(self) -> None: ...
