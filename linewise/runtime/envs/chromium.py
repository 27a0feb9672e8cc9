"""linewise's own environment: an isolated context on the shared Chromium, async throughout."""

from __future__ import annotations

from pathlib import Path

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import ActionContext
from linewise.errors import BrowserError
from linewise.prompts import render_prompt
from linewise.records import BlockedNavigation, NavigationEvents
from linewise.runtime.browser.chromium import Browser, BrowserSession
from linewise.runtime.browser.executor import ActionOutcome, SettleConfig, execute_action
from linewise.runtime.browser.extraction import observe
from linewise.runtime.browser.guard import NavigationGuard
from linewise.runtime.browser.navigation import NavigationPolicy
from linewise.runtime.browser.observation import Observation
from linewise.runtime.tasks.browser_task import BrowserTask, TaskStart, TaskStatus


class ChromiumEnv:
    """One episode in a fresh browser context of ``browser``, running ``task``, under the
    navigation policy of the browser's settings and the task (downloads, when allowed,
    go to ``episode_dir/downloads``)."""

    def __init__(
        self,
        browser: Browser,
        task: BrowserTask,
        settle: SettleConfig | None = None,
        episode_dir: Path | None = None,
    ) -> None:
        self.browser = browser
        self.task = task
        self.settle = settle
        self.policy = NavigationPolicy.for_task(
            browser.config.navigation,
            task.start_url,
            allowed_domains=task.allowed_domains,
            blocked_domains=task.blocked_domains,
            devtools_port=browser.devtools_port,
        )
        self.guard = NavigationGuard(self.policy, episode_dir)
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
        self._session = await self.browser.new_session(self.guard)
        start = await self.task.setup(self._session.page)
        await self.guard.settle()
        return start

    async def observe(self, *, screenshot: bool) -> Observation:
        await self.guard.settle()
        self._last = await observe(self.session, screenshot=screenshot)
        return self._last

    async def act(self, action: ParsedAction) -> ActionOutcome:
        last = self._last
        ctx = ActionContext(
            self.session,
            timeout_ms=self.browser.config.action_timeout_ms,
            known_bids=frozenset(last.elements) if last is not None else None,
            interactive_hint=last.interactive_hint() if last is not None else "",
            check_url=self._check_model_url,
        )
        outcome = await execute_action(action, ctx, self.settle)
        await self.guard.settle()
        notes = self.guard.take_notes()
        if not notes:
            return outcome
        told = "".join(_blocked_note(block) for block in notes).strip()
        error = f"{outcome.error}\n{told}" if outcome.error else told
        return outcome.model_copy(update={"error": error})

    def take_navigation_events(self) -> NavigationEvents:
        return self.guard.take_events()

    def _check_model_url(self, url: str) -> str | None:
        return self.guard.check_model_url(url, from_url=self.session.page.url)

    async def status(self) -> TaskStatus:
        return await self.task.status(self.session.page)

    async def judge(self, answer: str | None, reward: float) -> bool | None:
        page = await self.session.ensure_page()
        return await self.task.judge(page, answer, reward)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _blocked_note(block: BlockedNavigation) -> str:
    return render_prompt("navigation_blocked.md", url=block.url, reason=block.reason,
                         initiator=block.initiator)
