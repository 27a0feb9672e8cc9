"""linewise's own environment: an isolated context on the shared Chromium, async throughout."""

from __future__ import annotations

from playwright.async_api import Error as PlaywrightError

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import ActionContext
from linewise.errors import BrowserError, LinewiseError
from linewise.records import TargetBox
from linewise.runtime.browser.chromium import Browser, BrowserSession
from linewise.runtime.browser.executor import ActionOutcome, SettleConfig, execute_action
from linewise.runtime.browser.extraction import observe
from linewise.runtime.browser.observation import Observation
from linewise.runtime.tasks.browser_task import BrowserTask, TaskStart, TaskStatus


class ChromiumEnv:
    """One episode in a fresh browser context of ``browser``, running ``task``."""

    def __init__(
        self, browser: Browser, task: BrowserTask, settle: SettleConfig | None = None
    ) -> None:
        self.browser = browser
        self.task = task
        self.settle = settle
        self._session: BrowserSession | None = None
        self._last: Observation | None = None

    @property
    def agent_can_end(self) -> bool:
        return self.task.agent_can_end

    @property
    def session(self) -> BrowserSession:
        if self._session is None:
            raise BrowserError("the environment is not reset")
        return self._session

    async def reset(self) -> TaskStart:
        self._session = await self.browser.new_session()
        return await self.task.setup(self._session.page)

    async def observe(self, *, screenshot: bool) -> Observation:
        self._last = await observe(self.session, screenshot=screenshot)
        return self._last

    async def act(self, action: ParsedAction) -> ActionOutcome:
        last = self._last
        ctx = ActionContext(
            self.session,
            timeout_ms=self.browser.config.action_timeout_ms,
            known_bids=frozenset(last.elements) if last is not None else None,
            interactive_hint=last.interactive_hint() if last is not None else "",
        )
        box = await target_box(action, ctx)
        outcome = await execute_action(action, ctx, self.settle)
        outcome.target_box = box
        return outcome

    async def status(self) -> TaskStatus:
        return await self.task.status(self.session.page)

    async def judge(self, answer: str | None, reward: float) -> bool | None:
        page = await self.session.ensure_page()
        return await self.task.judge(page, answer, reward)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


TARGET_BOX_TIMEOUT_MS = 300
"""How long measuring the target may wait: the action itself reports a missing element."""


async def target_box(action: ParsedAction, ctx: ActionContext) -> TargetBox | None:
    """The box of the action's first element, for the trace viewer; None when the action
    names no element or it cannot be measured (the action then reports why)."""
    if not action.bids:
        return None
    try:
        locator = await ctx.locate(action.bids[0])
        box = await locator.bounding_box(timeout=TARGET_BOX_TIMEOUT_MS)
    except (LinewiseError, PlaywrightError):
        return None
    return TargetBox(**box) if box is not None else None
