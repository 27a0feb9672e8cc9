"""linewise's own environment: an isolated context on the shared Chromium, async throughout."""

from __future__ import annotations

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import ActionContext
from linewise.errors import BrowserError
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
        return await execute_action(action, ctx, self.settle)

    async def status(self) -> TaskStatus:
        return await self.task.status(self.session.page)

    async def judge(self, answer: str | None, reward: float) -> bool | None:
        page = await self.session.ensure_page()
        return await self.task.judge(page, answer, reward)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
