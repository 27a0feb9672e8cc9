"""The observed document, held where the page cannot reach: typing secrets into it only.

After each observation the active tab's main document gets (or keeps) a private world
(CDP ``Page.createIsolatedWorld``). Its globals are invisible to the page's scripts and
it dies with its document; it keeps the elements the marking found, by bid. So:

- a secret is typed in that world, in one evaluation that also checks the document's
  origin and takes the element the model saw (the object, not an attribute a page could
  copy): a page that navigated since the observation, a popup that took the tab, or a
  planted element is refused, never typed into;
- the screenshot mask reads from there the boxes of the fields secrets went into, of
  the password fields and of every text that holds a secret (a page that echoes it),
  and paints them over the captured image, so what the page's frames and styles do (a
  refused ``file:`` frame, cross-origin frames, a rule that recolours the field) cannot
  undo it. The boxes are read just before and just after the capture, with the
  animations of what shows a secret (and of its ancestors) paused, and both are
  painted: a field that moves cannot be captured in one place and measured in another.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import structlog
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from linewise.errors import ActionError, BrowserError
from linewise.runtime.browser.cdp import CDPSender
from linewise.runtime.browser.scripts import own_js
from linewise.runtime.redaction import MIN_VALUE_LENGTH

log = structlog.get_logger(__name__)

WORLD_NAME = "linewise"
SECRET_FIELD_ATTRIBUTE = "data-linewise-secret"
"""Set on a field a secret was typed into, for the style-sheet mask of same-origin frames
(``js/mask_secret_fields.js``); the painted mask does not rely on it."""

MASK_COLOR = (68, 68, 68)
MASK_MARGIN_PX = 2


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` as the page's ``location`` spells it (default ports left
    out), ``file://`` for files."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(scheme)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and port != default:
        host = f"{host}:{port}"
    return f"{scheme}://{host}"


@dataclass
class _World:
    page: Page
    cdp: CDPSender
    context_id: int


class DocumentBinding:
    """The private world of the document last observed, for one episode."""

    def __init__(self) -> None:
        self._world: _World | None = None
        self.secret_values: set[str] = set()
        """Values whose text the screenshot mask paints over: every secret typed, and
        those the environment names (``SecretsEnvironment``)."""

    async def bind(self, page: Page, cdp: CDPSender, attribute: str) -> None:
        """Record the elements of ``page``'s document, as just marked under ``attribute``.
        On failure nothing is bound, and typing a secret is refused until the next one."""
        world = self._world
        self._world = None
        try:
            if world is None or world.page is not page or world.cdp is not cdp:
                world = await _new_world(page, cdp)
            try:
                await _call(world, own_js("bind_document.js"), attribute)
            except (BrowserError, PlaywrightError):  # that document is gone: a new one
                world = await _new_world(page, cdp)
                await _call(world, own_js("bind_document.js"), attribute)
        except (BrowserError, PlaywrightError) as exc:
            log.warning("observed document not bound", url=page.url,
                        error=str(exc).splitlines()[0])
            return
        self._world = world

    async def type_secret(self, bid: str, value: str, origin: str) -> None:
        """Type ``value`` into element ``bid`` of the observed document, if that document
        is still there and at ``origin``; otherwise ``ActionError`` and nothing typed."""
        world = self._world
        self.secret_values.add(value)
        refused = "A secret is typed only into the page as it was observed"
        if world is None or world.page.is_closed():
            raise ActionError(f"{refused}, which is gone; nothing was typed.")
        try:
            why_not = await _call(world, own_js("type_bound.js"), bid, value, origin,
                                  SECRET_FIELD_ATTRIBUTE)
        except (BrowserError, PlaywrightError) as exc:
            log.info("secret refused: the observed document is gone",
                     error=str(exc).splitlines()[0])
            raise ActionError(
                f"{refused}, and it has navigated away since; nothing was typed."
            ) from None
        if why_not is not None:
            raise ActionError(f"{refused} ({why_not}); nothing was typed.")

    async def boxes(self, page: Page, phase: str) -> tuple[list[list[float]], float]:
        """The viewport boxes (CSS pixels) of what shows a secret in ``page``'s observed
        document (``js/secret_field_boxes.js``) and the viewport's CSS width; none when
        ``page`` is not the observed one. ``phase``: ``before`` a capture (the
        animations of what shows a secret are paused, and it is measured once they are
        still) or ``after`` it (measured again, and they run on)."""
        world = self._world
        if world is None or world.page is not page:
            return [], 0.0
        # A value too short would mask ordinary words (see MIN_VALUE_LENGTH).
        values = sorted(v for v in self.secret_values if len(v) >= MIN_VALUE_LENGTH)
        found = await _call(world, own_js("secret_field_boxes.js"), values, phase)
        if not found:
            return [], 0.0
        return found["boxes"], float(found["width"])


def paint_boxes(png: bytes, boxes: list[list[float]], css_width: float) -> bytes:
    """``png`` with each ``[left, top, width, height]`` box (CSS pixels of a viewport
    ``css_width`` wide) filled, with a small margin."""
    from PIL import Image, ImageDraw  # browsergym-core's dependency; only with screenshots

    image = Image.open(io.BytesIO(png)).convert("RGB")
    scale = image.width / css_width if css_width else 1.0
    draw = ImageDraw.Draw(image)
    for left, top, width, height in boxes:
        if width <= 0 or height <= 0:
            continue
        draw.rectangle(
            [(left - MASK_MARGIN_PX) * scale, (top - MASK_MARGIN_PX) * scale,
             (left + width + MASK_MARGIN_PX) * scale, (top + height + MASK_MARGIN_PX) * scale],
            fill=MASK_COLOR,
        )
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


async def _new_world(page: Page, cdp: CDPSender) -> _World:
    tree = await cdp.send("Page.getFrameTree")
    created = await cdp.send("Page.createIsolatedWorld", {
        "frameId": tree["frameTree"]["frame"]["id"], "worldName": WORLD_NAME,
    })
    return _World(page, cdp, int(created["executionContextId"]))


async def _call(world: _World, function: str, *args: Any) -> Any:
    """``function(*args)`` in the world; a JS exception is a ``BrowserError``."""
    result = await world.cdp.send("Runtime.callFunctionOn", {
        "functionDeclaration": function,
        "executionContextId": world.context_id,
        "arguments": [{"value": arg} for arg in args],
        "returnByValue": True,
        "awaitPromise": True,
    })
    if "exceptionDetails" in result:
        details = result["exceptionDetails"]
        text = details.get("exception", {}).get("description") or details.get("text", "")
        raise BrowserError(f"script failed in the observed document: {text}")
    return result.get("result", {}).get("value")
