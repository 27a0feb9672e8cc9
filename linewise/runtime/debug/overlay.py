"""The box drawn in the browser around the element an action is about to act on.

It is drawn in the top frame by ``js/target_overlay.js`` and removed again before the
page is observed or the action runs, so that it never reaches the model (see the
script for why it would stay out of the accessibility tree and the page's reach even if
it were left behind). Every environment with a page (``PageAccess``: linewise's
Chromium and BrowserGym's) draws it where its page lives; other environments draw
nothing.
"""

from __future__ import annotations

from typing import Any

import structlog
from playwright.async_api import Error as PlaywrightError

from linewise.agent.action_parser import ParsedAction
from linewise.errors import LinewiseError
from linewise.records import TargetBox
from linewise.runtime.browser.scripts import own_js
from linewise.runtime.envs.base import PageAccess

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
    names no element, it cannot be measured, or the environment has no page to draw in."""
    if not action.bids or not isinstance(env, PageAccess):
        return None
    drawing = {"label": str(action)[:80], "color": _css_color()}
    try:
        box = await env.measure(action.bids[0], OVERLAY_TIMEOUT_S)
        await env.evaluate(own_js("target_overlay.js"), _argument(box, drawing),
                           OVERLAY_TIMEOUT_S)
        return box
    except (TimeoutError, PlaywrightError, LinewiseError) as exc:
        log.debug("target box not drawn", error=str(exc) or "timeout")
    return None


async def hide_target(env: object) -> None:
    """Remove the box if one is drawn."""
    if not isinstance(env, PageAccess):
        return
    try:
        await env.evaluate(own_js("target_overlay.js"),
                           _argument(None, {"label": "", "color": ""}), OVERLAY_TIMEOUT_S)
    except (TimeoutError, PlaywrightError, LinewiseError) as exc:
        log.debug("target box not removed", error=str(exc) or "timeout")


def _argument(box: TargetBox | None, drawing: dict[str, str]) -> dict[str, Any]:
    """The script's argument: a box to draw, or None to remove the one drawn."""
    return {"box": box.model_dump() if box is not None else None, **drawing}
