"""The environment contract the step loop runs on, in the spirit of BrowserGym's reset/step.

An environment owns one episode's browser and task: ``reset`` sets the task up and gives
its goal, ``observe`` reads the page into an ``Observation`` (the same flattening for every
environment), ``act`` runs one parsed action, ``status`` says whether the task has ended
and with what reward, and ``judge`` decides success once the loop is over. The loop in
``runtime/episode.py`` knows nothing else about where the page comes from.

What an environment offers beyond that, it states by implementing an optional
capability: ``PageAccess`` (a page the debugging features draw and record in) and
``SecretTyping`` (it types a secret itself, bound to the page's origin). Features ask for
the capability, never for a concrete environment class; an environment without it is
skipped by them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from linewise.agent.action_parser import ParsedAction
from linewise.records import NavigationEvents, TargetBox
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

    @property
    def single_page(self) -> bool:
        """Whether the task lives on its one page (MiniWoB++), so that navigating or
        changing tabs can only lose it."""
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


@runtime_checkable
class PageAccess(Protocol):
    """A browser page that features may reach between steps: the debugger's target box
    (``debug/overlay.py``) and the Playwright trace (``viewer/playwright_trace.py``).
    Each environment runs the work where its page lives (linewise's Chromium on the
    asyncio loop, BrowserGym's on its worker thread)."""

    async def measure(self, bid: str, timeout_s: float) -> TargetBox | None:
        """The box of element ``bid``; None when it has none."""
        ...

    async def evaluate(self, script: str, argument: dict[str, Any], timeout_s: float) -> None:
        """Run ``script`` (a function of one argument) in the page's top frame."""
        ...

    async def start_trace_chunk(self, title: str, *, first: bool) -> None:
        """Start one Playwright trace chunk titled ``title`` (tracing first if ``first``)."""
        ...

    async def stop_trace_chunk(self, path: Path) -> None:
        """Save the chunk started last to ``path``."""
        ...


@runtime_checkable
class SecretTyping(Protocol):
    """An environment that types a secret itself: into the document last observed, and
    only while that document is at ``origin``. Elsewhere the secret's own domain check
    is the only one."""

    async def type_secret(self, action: ParsedAction, value: str, origin: str) -> ActionOutcome:
        ...
