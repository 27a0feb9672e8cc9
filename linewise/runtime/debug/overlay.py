"""The box drawn in the browser around the element an action is about to act on.

It is drawn in the top frame by ``js/target_overlay.js`` and removed again before the
page is observed or the action runs, so that it never reaches the model (see the
script for why it would stay out of the accessibility tree and the page's reach even if
it were left behind). Both browsers draw it: linewise's Chromium from the asyncio loop,
BrowserGym's on its environment's worker thread (sync Playwright). Other environments
draw nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from playwright.async_api import Error as PlaywrightError
from playwright.sync_api import Page as SyncPage

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import ActionContext
from linewise.errors import LinewiseError
from linewise.records import TargetBox
from linewise.runtime.browser.scripts import own_js
from linewise.runtime.envs.browsergym import BrowserGymEnv
from linewise.runtime.envs.browsergym import target_box as gym_target_box
from linewise.runtime.envs.chromium import ChromiumEnv

log = structlog.get_logger(__name__)

OVERLAY_COLOR = (255, 0, 255)
"""Pure magenta: rare on real pages, so a test can look for it in every saved screenshot."""

OVERLAY_HOST_ATTRIBUTE = "data-linewise-overlay"
"""The attribute of the overlay's host element (the script removes elements with it)."""

OVERLAY_TIMEOUT_S = 5.0
"""Drawing or removing the box is cosmetic: a page that does not answer is left alone.
Longer than the trace's measuring of the target: a person is waiting to see it."""


def _css_color() -> str:
    red, green, blue = OVERLAY_COLOR
    return f"rgb({red}, {green}, {blue})"


async def show_target(env: object, action: ParsedAction) -> TargetBox | None:
    """Draw the box around the action's first element; its box, or None when the action
    names no element, it cannot be measured, or the environment cannot draw."""
    if not action.bids:
        return None
    drawing = {"label": str(action)[:80], "color": _css_color()}
    bid = action.bids[0]
    try:
        if isinstance(env, ChromiumEnv):
            box = await asyncio.wait_for(_measure(env, bid), OVERLAY_TIMEOUT_S)
            await _evaluate(env, _argument(box, drawing))
            return box
        if isinstance(env, BrowserGymEnv):
            return await env.on_page(
                "target box", lambda page: _draw_on_gym_page(page, bid, drawing),
                OVERLAY_TIMEOUT_S,
            )
    except (TimeoutError, PlaywrightError, LinewiseError) as exc:
        log.debug("target box not drawn", error=str(exc) or "timeout")
    return None


async def hide_target(env: object) -> None:
    """Remove the box if one is drawn."""
    hidden = _argument(None, {"label": "", "color": ""})
    try:
        if isinstance(env, ChromiumEnv):
            await _evaluate(env, hidden)
        elif isinstance(env, BrowserGymEnv):
            await env.on_page("target box", lambda page: _evaluate_on_gym_page(page, hidden),
                              OVERLAY_TIMEOUT_S)
    except (TimeoutError, PlaywrightError, LinewiseError) as exc:
        log.debug("target box not removed", error=str(exc) or "timeout")


def _argument(box: TargetBox | None, drawing: dict[str, str]) -> dict[str, Any]:
    """The script's argument: a box to draw, or None to remove the one drawn."""
    return {"box": box.model_dump() if box is not None else None, **drawing}


async def _measure(env: ChromiumEnv, bid: str) -> TargetBox | None:
    locator = await ActionContext(env.session).locate(bid)
    box = await locator.bounding_box(timeout=OVERLAY_TIMEOUT_S * 1000)
    return TargetBox(**box) if box is not None else None


async def _evaluate(env: ChromiumEnv, argument: dict[str, Any]) -> None:
    page = env.session.page
    await asyncio.wait_for(page.evaluate(own_js("target_overlay.js"), argument),
                           OVERLAY_TIMEOUT_S)


def _draw_on_gym_page(page: SyncPage, bid: str, drawing: dict[str, str]) -> TargetBox | None:
    """On BrowserGym's worker thread: measure the element and draw (or clear) the box."""
    box = gym_target_box(page, bid)
    _evaluate_on_gym_page(page, _argument(box, drawing))
    return box


def _evaluate_on_gym_page(page: SyncPage, argument: dict[str, Any]) -> None:
    page.evaluate(own_js("target_overlay.js"), argument)
