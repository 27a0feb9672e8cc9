"""Running one parsed action against the browser, and turning failures into feedback.

Nothing the model asks for can crash the episode: an unknown bid, a hidden or disabled
element, a timeout or a dead page becomes ``ActionOutcome.error``, a short message the
model reads as ``last_action_error`` on the next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import structlog
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from pydantic import BaseModel, Field

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import ACTIONS, ActionContext
from linewise.agent.trace_zone import traced
from linewise.errors import ActionError, BrowserError, ElementNotFound
from linewise.records import TargetBox
from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.browser.observed import URL_SHOWN, page_changed
from linewise.runtime.browser.scripts import own_js

log = structlog.get_logger(__name__)


class SettleConfig(BaseModel):
    """How long to let the page react to an action before observing it."""

    load_timeout_ms: int = 3000
    quiet_ms: int = 60
    max_quiet_wait_ms: int = 600


class ActionOutcome(BaseModel):
    """What running one action did: its error for the model, and its timings."""

    error: str | None = None
    failed_bid: str | None = Field(
        default=None, description="The element the action could not find or use, if any."
    )
    duration_ms: float = 0.0
    settle_ms: float = 0.0
    target_box: TargetBox | None = Field(
        default=None, description="The box of the action's first element before it ran."
    )


async def execute_action(
    action: ParsedAction,
    ctx: ActionContext,
    settle: SettleConfig | None = None,
    settle_timeout_s: float | None = None,
    run: Callable[[ActionContext], Awaitable[None]] | None = None,
) -> ActionOutcome:
    """Run the action (or ``run``, which does the action's work another way), then wait
    for the page to settle (at most ``settle_timeout_s``: a page busy in a script or a
    dialog loop is observed as it is). Never raises for page trouble."""
    session = ctx.session
    settle = settle or SettleConfig()
    acting = session.acting() if isinstance(session, BrowserSession) else _no_session()
    async with acting:  # a popup the action opened comes to the front when it ends
        started = time.perf_counter()
        error, failed_bid = await _run(action, ctx, run)
        acted = time.perf_counter()
        await _settle(ctx, settle, settle_timeout_s)
        settled = _active(ctx)
    if _active(ctx) is not settled:
        # the popup the action opened, now in front: its load, within what is left
        left = None if settle_timeout_s is None else max(
            settle_timeout_s - (time.perf_counter() - acted), POPUP_SETTLE_S)
        await _settle(ctx, settle, left)
    done = time.perf_counter()
    if error:
        log.debug("action failed", action=str(action), error=error)
    return ActionOutcome(
        error=error,
        failed_bid=failed_bid,
        duration_ms=(acted - started) * 1000,
        settle_ms=(done - acted) * 1000,
    )


@contextlib.asynccontextmanager
async def _no_session() -> AsyncIterator[None]:
    yield


async def _settle(ctx: ActionContext, settle: SettleConfig, timeout_s: float | None) -> None:
    try:
        await asyncio.wait_for(settle_page(ctx, settle), timeout_s)
    except TimeoutError:
        log.info("page did not settle in time", timeout_s=timeout_s)


POPUP_SETTLE_S = 1.0
"""The least a popup the action opened is given to load, whatever the settle took."""


def _active(ctx: ActionContext) -> Page | None:
    try:
        return ctx.page
    except BrowserError:
        return None


async def _run(action: ParsedAction, ctx: ActionContext,
               run: Callable[[ActionContext], Awaitable[None]] | None
               ) -> tuple[str | None, str | None]:
    """The action's error for the model, and the element it could not find, if any."""
    try:
        if run is not None:
            await run(ctx)  # a secret's typing: never in a trace, its value least of all
        else:
            # the action's own Playwright calls are what a step's trace chunk shows
            with traced(_active(ctx)):
                await ACTIONS[action.name](ctx, **action.arguments)
    except ElementNotFound as exc:
        return str(exc), exc.bid
    except ActionError as exc:
        return str(exc), None
    except PlaywrightTimeoutError as exc:
        return describe_playwright_error(exc, timeout=True), None
    except PlaywrightError as exc:
        if any(gone in str(exc) for gone in DOCUMENT_GONE):
            # The element's document went while the action ran on it: Playwright
            # refused to go on in another (``observed.py``).
            return str(page_changed(f"its element left it while the action ran (the tab "
                                    f"is at {_url(ctx)})")), None
        return describe_playwright_error(exc), None
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}", None
    return None, None


DOCUMENT_GONE = ("Element is not attached to the DOM", "Execution context was destroyed")
"""What Playwright says of an element handle whose document is gone."""


def _url(ctx: ActionContext) -> str:
    try:
        return ctx.page.url[:URL_SHOWN]
    except BrowserError:
        return "(no tab)"


def describe_playwright_error(exc: PlaywrightError, *, timeout: bool = False) -> str:
    """Playwright's first line plus the last call-log lines, which say *why* it waited."""
    message = exc.message if hasattr(exc, "message") else str(exc)
    head, _, call_log = message.partition("Call log:")
    first = head.strip().splitlines()[0] if head.strip() else "Playwright error"
    reasons = [
        line.strip().lstrip("-").strip()
        for line in call_log.strip().splitlines()
        if line.strip() and "waiting for" not in line and "attempting" not in line
    ]
    detail = "; ".join(dict.fromkeys(reasons[-3:]))
    kind = "TimeoutError" if timeout else "Error"
    return f"{kind}: {first}" + (f" ({detail})" if detail else "")


async def settle_page(ctx: ActionContext, settle: SettleConfig) -> None:
    """Wait for the active tab's DOM to load and then to stop changing (bounded)."""
    try:
        page = await ctx.session.ensure_page()
    except PlaywrightError:
        return
    await _wait_loaded(page, settle.load_timeout_ms)
    try:
        await page.evaluate(
            own_js("wait_dom_quiet.js"), [settle.quiet_ms, settle.max_quiet_wait_ms]
        )
    except PlaywrightError:
        # The page navigated while we watched it: wait for the new document instead.
        await _wait_loaded(page, settle.load_timeout_ms)


async def _wait_loaded(page: Page, timeout_ms: int) -> None:
    try:
        await page.wait_for_load_state("domcontentloaded", timeout=timeout_ms)
    except (TimeoutError, PlaywrightError):
        pass  # a slow page is observed as it is; the model can wait with noop()
