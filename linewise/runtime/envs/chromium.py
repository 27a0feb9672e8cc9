"""linewise's own environment: an isolated context on the shared Chromium, async throughout.

Every operation runs under a deadline and against the session's fault: a stalled page
ends the step with ``BrowserStalled`` in bounded time, and a crashed renderer or a dead
Chromium ends it at once with ``BrowserCrashed`` instead of leaving it to wait on a
page that will never answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog
from playwright.async_api import Error as PlaywrightError

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import ActionContext
from linewise.agent.trace_zone import untraced
from linewise.errors import BrowserCrashed, BrowserError, BrowserStalled, LinewiseError
from linewise.prompts import render_prompt
from linewise.records import AttackVerdict, BlockedNavigation, NavigationEvents, TargetBox
from linewise.runtime.browser.chromium import Browser, BrowserSession
from linewise.runtime.browser.executor import ActionOutcome, SettleConfig, execute_action
from linewise.runtime.browser.extraction import observe
from linewise.runtime.browser.guard import NavigationGuard
from linewise.runtime.browser.navigation import NavigationPolicy
from linewise.runtime.browser.observation import Observation
from linewise.runtime.tasks.browser_task import BrowserTask, TaskStart, TaskStatus

log = structlog.get_logger(__name__)

T = TypeVar("T")

MARGIN_S = 5.0
"""Beyond the sum of an operation's own Playwright timeouts, before the step gives up."""
READINGS = 3
"""Readings of a page per observation at most: one more whenever a document committed
during the last (a page that keeps navigating is observed as its third reading found it)."""


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
        self.settle = settle or SettleConfig()
        self.policy = NavigationPolicy.for_task(
            browser.config.navigation,
            task.start_url,
            allowed_domains=task.allowed_domains,
            blocked_domains=task.blocked_domains,
            devtools_port=browser.devtools_port,
        )
        self.guard = NavigationGuard(self.policy, episode_dir,
                                     browser.config.navigation_timeout_ms)
        self._session: BrowserSession | None = None
        self._last: Observation | None = None
        self._refused_urls: list[str] = []

    @property
    def agent_can_end(self) -> bool:
        return self.task.agent_can_end

    @property
    def single_page(self) -> bool:
        return self.task.single_page

    @property
    def session(self) -> BrowserSession:
        if self._session is None:
            raise BrowserError("the environment is not reset")
        return self._session

    async def _guarded(self, stage: str, work: Awaitable[T], timeout_s: float) -> T:
        """``work`` within ``timeout_s``, ended at once by a crash of the browser or the
        tab (the crash wins over whatever the operation saw of it)."""
        session = self.session
        job = asyncio.ensure_future(work)
        fault = asyncio.ensure_future(session.faulted.wait())
        try:
            await asyncio.wait({job, fault}, timeout=timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            fault.cancel()
            if not job.done():
                job.cancel()
                job.add_done_callback(_ignore_result)
        if not job.done() or job.cancelled():
            if session.fault is not None:
                raise session.fault
            raise BrowserStalled(stage, timeout_s, f"at {self._url()}")
        error = job.exception()
        if session.fault is None and isinstance(error, PlaywrightError):
            self._notice_crash(error)
        if session.fault is not None:
            raise session.fault from error
        return job.result()

    def _notice_crash(self, error: PlaywrightError) -> None:
        """A crash can reach an operation as its error before Playwright's event."""
        if not self.browser.connected:
            self.session.fail(BrowserCrashed("browser", "Chromium disconnected during the episode"))
        elif "crash" in str(error).lower():
            self.session.fail(BrowserCrashed("renderer", f"the tab's renderer crashed: {error}"))

    def _url(self) -> str:
        try:
            return self.session.page.url
        except BrowserError:
            return "(no tab)"

    async def reset(self) -> TaskStart:
        config = self.browser.config
        self._session = await asyncio.wait_for(
            self.browser.new_session(self.guard), config.navigation_timeout_ms / 1000 + MARGIN_S
        )
        start = await self._guarded(
            "task start", self.task.setup(self._session.page),
            config.navigation_timeout_ms / 1000 + MARGIN_S,
        )
        await self._guarded("task start", self.guard.settle(),
                            config.navigation_timeout_ms / 1000 + MARGIN_S)
        return start

    async def observe(self, *, screenshot: bool) -> Observation:
        config = self.browser.config
        for reading in range(READINGS):
            await self._guarded("observe", self.guard.settle(),
                                config.navigation_timeout_ms / 1000 + MARGIN_S)
            committed = self.session.documents_committed
            last = await self._guarded(
                "observe",
                observe(self.session, screenshot=screenshot,
                        frame_timeout_s=config.frame_timeout_ms / 1000,
                        invisible_text=config.invisible_text,
                        crop=self.task.crop_screenshots),
                config.observe_timeout_ms / 1000,
            )
            if self.session.documents_committed == committed:
                break
            # The page navigated while it was read (its own timer, or the guard undoing
            # a refused document): what was read may mix two documents, or be one the
            # guard has not undone yet.
            log.info("the page navigated while it was read", reading=reading,
                     url=last.url[:200])
        last.dialogs = self.session.take_dialogs()
        self._last = last
        return last

    def mask_secret_values(self, values: list[str]) -> None:
        """Paint over text holding any of ``values`` in this episode's screenshots."""
        self.session.binding.secret_values.update(values)

    async def type_secret(self, action: ParsedAction, value: str, origin: str) -> ActionOutcome:
        """``action``, a ``fill`` of a secret, typing ``value`` only into the document
        last observed and only while it is at ``origin`` (``binding.py``)."""
        bid = str(action.arguments.get("bid", ""))

        async def type_bound(ctx: ActionContext) -> None:
            await self.session.binding.type_secret(bid, value, origin)

        return await self.act(action, run=type_bound)

    async def measure(self, bid: str, timeout_s: float) -> TargetBox | None:
        async def box_of() -> TargetBox | None:
            element = await ActionContext(self.session).locate(bid)
            box = await element.bounding_box()
            return TargetBox(**box) if box is not None else None

        with untraced(self.session.context):  # the hooks' boxes are no action
            return await asyncio.wait_for(box_of(), timeout_s)

    async def evaluate(self, script: str, argument: dict[str, Any], timeout_s: float) -> None:
        with untraced(self.session.context):
            await asyncio.wait_for(self.session.page.evaluate(script, argument), timeout_s)

    async def start_trace_chunk(self, title: str, *, first: bool) -> None:
        tracing = self.session.context.tracing
        if first:
            await tracing.start(screenshots=True, snapshots=True)
        await tracing.start_chunk(title=title)

    async def stop_trace_chunk(self, path: Path) -> None:
        await self.session.context.tracing.stop_chunk(path=path)

    async def act(
        self, action: ParsedAction, run: Callable[[ActionContext], Awaitable[None]] | None = None
    ) -> ActionOutcome:
        # Only the action's own Playwright calls are traced (``agent/trace_zone.py``):
        # measuring its target, watching for popups and settling are linewise's.
        with untraced(self.session.context):
            return await self._act(action, run)

    async def _act(
        self, action: ParsedAction, run: Callable[[ActionContext], Awaitable[None]] | None
    ) -> ActionOutcome:
        last = self._last
        config = self.browser.config
        ctx = ActionContext(
            self.session,
            timeout_ms=config.action_timeout_ms,
            known_bids=frozenset(last.elements) if last is not None else None,
            interactive_hint=last.interactive_hint() if last is not None else "",
            check_url=self._check_model_url,
        )
        # The action's own timeouts (its element, or a navigation) and the settle bound
        # come first; the deadline only catches what ignores them.
        longest_ms = max(config.action_timeout_ms, config.navigation_timeout_ms)
        deadline_s = (longest_ms + config.settle_timeout_ms) / 1000 + MARGIN_S
        box = await target_box(action, ctx)
        outcome = await self._guarded(
            "act", execute_action(action, ctx, self.settle, config.settle_timeout_ms / 1000, run),
            deadline_s,
        )
        outcome.target_box = box
        await self._guarded("act", self.guard.settle(),
                            config.navigation_timeout_ms / 1000 + MARGIN_S)
        notes = self.guard.take_notes()
        if not notes:
            return outcome
        told = "".join(blocked_note(block) for block in notes).strip()
        error = f"{outcome.error}\n{told}" if outcome.error else told
        return outcome.model_copy(update={"error": error})

    async def page_changed(self) -> None:
        """Nothing to forget: every ``observe`` reads the page."""

    def take_navigation_events(self) -> NavigationEvents:
        events = self.guard.take_events()
        self._refused_urls += [block.url for block in events.blocked]
        return events

    def _check_model_url(self, url: str) -> str | None:
        return self.guard.check_model_url(url, from_url=self.session.page.url)

    async def status(self) -> TaskStatus:
        return await self._guarded(
            "status", self.task.status(self.session.page),
            self.browser.config.frame_timeout_ms / 1000 + MARGIN_S,
        )

    async def judge(self, answer: str | None, reward: float) -> bool | None:
        page = await self.session.ensure_page()
        return await self._guarded(
            "judge", self.task.judge(page, answer, reward),
            self.browser.config.navigation_timeout_ms / 1000 + MARGIN_S,
        )

    async def judge_attack(
        self, answer: str | None, expand: Callable[[str], str]
    ) -> AttackVerdict | None:
        """The task's attack check, if it has one (``browser_task.judge_attack``)."""
        judge = getattr(self.task, "judge_attack", None)
        if judge is None:
            return None
        refused = [*self._refused_urls, *(b.url for b in self.guard.take_events().blocked)]
        page = await self.session.ensure_page()
        verdict: AttackVerdict | None = await self._guarded(
            "judge", judge(page, answer, refused, expand),
            self.browser.config.navigation_timeout_ms / 1000 + MARGIN_S,
        )
        return verdict

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            try:
                await asyncio.wait_for(
                    session.close(), self.browser.config.close_timeout_ms / 1000
                )
            except (TimeoutError, PlaywrightError) as exc:
                log.warning("browser context did not close", error=str(exc) or "timeout")


def _ignore_result(job: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned operation's outcome so asyncio does not report it."""
    if not job.cancelled():
        job.exception()


def blocked_note(block: BlockedNavigation) -> str:
    """What the model is told about a navigation the page started and the policy refused."""
    return render_prompt("navigation_blocked.md", url=block.url, reason=block.reason,
                         initiator=block.initiator)


TARGET_BOX_TIMEOUT_MS = 300
"""How long measuring the target may wait: the action itself reports a missing element."""


async def target_box(action: ParsedAction, ctx: ActionContext) -> TargetBox | None:
    """The box of the action's first element, for the trace viewer; None when the action
    names no element or it cannot be measured (the action then reports why)."""
    if not action.bids:
        return None
    try:
        async with asyncio.timeout(TARGET_BOX_TIMEOUT_MS / 1000):
            element = await ctx.locate(action.bids[0])
            box = await element.bounding_box()
    except (LinewiseError, PlaywrightError, TimeoutError):
        return None
    return TargetBox(**box) if box is not None else None
