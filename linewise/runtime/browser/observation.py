"""What the agent observes each step: the marked page, flattened to numbered AXTree lines.

Extraction follows BrowserGym: its marking script gives every element a stable ``bid``
and smuggles it into the accessibility tree through an ARIA attribute; the CDP
accessibility trees of all frames are merged; the DOM snapshot supplies visibility,
bounding boxes and clickability; and browsergym-core's ``flatten_axtree_to_str`` turns
the tree into indented lines. Everything here is async Playwright, so it runs inside
the asyncio loop (BrowserGym's own env is sync and cannot).

Two fixes for Chromium 156: ``InlineTextBox`` nodes are dropped like ``LineBreak``
(they would double the size of a page), and ``generic`` nodes that are clickable
(spans and divs with click handlers) are kept, marked ``clickable``, where BrowserGym
would skip them for having no attributes.
"""

from __future__ import annotations

import asyncio
import base64
import pkgutil
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import structlog
from browsergym.core.observation import (
    extract_data_items_from_aria,
    extract_dom_extra_properties,
    pop_bids_from_attribute,
)
from browsergym.utils.obs import IGNORED_AXTREE_PROPERTIES, flatten_axtree_to_str
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Frame, Page
from pydantic import BaseModel

from linewise.axtree import INTERACTIVE_ROLES, number_lines, parse_line
from linewise.errors import BrowserError, ObservationError
from linewise.runtime.browser.cdp import CDPSender
from linewise.runtime.browser.chromium import BID_ATTRIBUTE, BrowserSession

log = structlog.get_logger(__name__)

IGNORED_ROLES = ("LineBreak", "InlineTextBox")
_SKIPPED_ROLE = "__linewise_skipped__"
_MAX_TRIES = 4
_TRANSIENT_ERRORS = (
    "Frame was detached",
    "Frame has been detached",
    "Frame with the given frameId is not found",
    "Execution context was destroyed",
    "Cannot find context with specified id",
    "Cannot mark a child frame without a bid",
    "Cannot read properties of undefined",
)


@cache
def _browsergym_js(name: str) -> str:
    data = pkgutil.get_data("browsergym.core", f"javascript/{name}")
    if data is None:  # pragma: no cover - broken browsergym-core install
        raise ObservationError(f"browsergym-core is missing javascript/{name}")
    return data.decode("utf-8")


@cache
def own_js(name: str) -> str:
    """A script shipped with linewise in ``runtime/js/``."""
    data = pkgutil.get_data(__package__ or "linewise.runtime.browser", f"js/{name}")
    if data is None:  # pragma: no cover - broken install
        raise ObservationError(f"linewise is missing js/{name}")
    return data.decode("utf-8")


@dataclass(slots=True, frozen=True)
class ElementProperties:
    """What the DOM snapshot says about one marked element.

    A plain dataclass: a large page has tens of thousands of them per step.
    """

    visibility: float | None = None
    clickable: bool = False


class TabInfo(BaseModel):
    index: int
    url: str
    title: str
    active: bool


@dataclass(slots=True)
class Observation:
    """One step's view of the browser, before any filtering.

    ``lines`` is the flattened AXTree, one element per line; ``elements`` maps every
    marked bid to its DOM-snapshot properties.
    """

    url: str
    title: str
    tabs: list[TabInfo]
    lines: list[str]
    focused_bid: str = ""
    elements: dict[str, ElementProperties] = field(default_factory=dict)
    screenshot_png: bytes | None = field(default=None, repr=False)
    extraction_ms: float = 0.0

    @property
    def text(self) -> str:
        """The AXTree as indented lines, as the action model sees it unfiltered."""
        return "\n".join(self.lines)

    @property
    def numbered(self) -> str:
        """Every line prefixed with its 1-based number: ``12|\\t[34] button 'OK'``."""
        return number_lines(self.lines)

    def interactive_hint(self, limit: int = 6) -> str:
        """A few interactive lines, e.g. ``[14] button 'Submit'; [12] textbox ''``."""
        found: list[str] = []
        for line in self.lines:
            parsed = parse_line(line)
            if parsed.bid is not None and parsed.role in INTERACTIVE_ROLES:
                found.append(parsed.head())
                if len(found) == limit:
                    break
        return "; ".join(found)


async def observe(session: BrowserSession, *, screenshot: bool = True) -> Observation:
    """Mark the active tab, read its AXTree and DOM snapshot, and flatten them."""
    started = time.perf_counter()
    page = await session.ensure_page()
    for attempt in range(_MAX_TRIES):
        last = attempt == _MAX_TRIES - 1
        try:
            await _mark_frames(page.main_frame, "", lenient=last)
            cdp = await session.cdp(page)
            dom, axtree = await asyncio.gather(_dom_snapshot(cdp), _merged_axtree(cdp))
            focused = await _focused_bid(page)
            break
        except (PlaywrightError, BrowserError) as exc:
            message = str(exc)
            if last or not any(m in message for m in _TRANSIENT_ERRORS):
                raise ObservationError(f"Could not read the page at {page.url}: {message}") from exc
            log.debug("observation retry", attempt=attempt, error=message.splitlines()[0])
            await asyncio.sleep(0.2)
        finally:
            await _unmark_frames(page)

    raw_elements = extract_dom_extra_properties(dom, scale_factor=1.0)
    elements = {
        bid: ElementProperties(props["visibility"], props["clickable"])
        for bid, props in raw_elements.items()
    }
    lines = flatten_axtree(axtree, elements)
    png = await _screenshot(cdp) if screenshot else None
    tabs = [
        TabInfo(index=i, url=p.url, title=await _safe_title(p), active=p is page)
        for i, p in enumerate(session.pages)
    ]
    active = next(t for t in tabs if t.active)
    return Observation(
        url=page.url,
        title=active.title,
        tabs=tabs,
        focused_bid=focused,
        lines=lines,
        elements=elements,
        screenshot_png=png,
        extraction_ms=(time.perf_counter() - started) * 1000,
    )


def flatten_axtree(axtree: dict[str, Any], elements: dict[str, ElementProperties]) -> list[str]:
    """Flatten a merged CDP AXTree into lines with browsergym-core's flattener.

    Generic nodes with no attributes are skipped as BrowserGym does, except clickable
    ones, which keep their bid and get a ``clickable`` attribute.
    """
    clickable_generics: dict[str, dict[str, Any]] = {}
    for node in axtree["nodes"]:
        if node["role"].get("value") != "generic" or "name" not in node:
            continue
        bid = node.get("browsergym_id")
        if bid and bid in elements and elements[bid].clickable:
            clickable_generics[bid] = {
                "visibility": elements[bid].visibility or 0.0,
                "bbox": None,
                "clickable": True,
                "set_of_marks": False,
            }
        elif not _has_printed_attributes(node):
            node["role"] = {"type": "role", "value": _SKIPPED_ROLE}
    text = flatten_axtree_to_str(
        axtree,
        extra_properties=clickable_generics,
        with_clickable=True,
        skip_generic=False,
        ignored_roles=[*IGNORED_ROLES, _SKIPPED_ROLE],
    )
    return [line for line in text.split("\n") if line.strip()]


def _has_printed_attributes(node: dict[str, Any]) -> bool:
    """Whether browsergym's flattener would print any attribute for this node."""
    for prop in node.get("properties", []):
        value = prop.get("value", {})
        if "value" not in value or prop["name"] in IGNORED_AXTREE_PROPERTIES:
            continue
        if prop["name"] in ("required", "focused", "atomic") and not value["value"]:
            continue
        return True
    return False


async def _mark_frames(frame: Frame, frame_bid: str, *, lenient: bool) -> None:
    warnings = await frame.evaluate(
        _browsergym_js("frame_mark_elements.js"), [frame_bid, BID_ATTRIBUTE, "standard_html"]
    )
    for warning in warnings or []:
        log.debug("marking warning", frame=frame_bid, warning=warning)
    children = []
    for child in frame.child_frames:
        if child.is_detached():
            continue
        element = await child.frame_element()
        if await element.content_frame() != child:
            continue  # e.g. the PDF viewer inside an <embed>
        sandbox = await element.get_attribute("sandbox")
        if sandbox is not None and "allow-scripts" not in sandbox.split():
            continue
        child_bid = await element.get_attribute(BID_ATTRIBUTE)
        if child_bid is None:
            if lenient:
                continue
            raise ObservationError("Cannot mark a child frame without a bid")
        children.append(_mark_frames(child, child_bid, lenient=lenient))
    await asyncio.gather(*children)


async def _unmark_frames(page: Page) -> None:
    script = _browsergym_js("frame_unmark_elements.js")
    for frame in page.frames:
        if frame.is_detached():
            continue
        try:
            await frame.evaluate(script)
        except PlaywrightError:
            continue  # detached or script-blocked frames keep nothing of ours that matters


async def _dom_snapshot(cdp: CDPSender) -> dict[str, Any]:
    # Only visibility (an attribute the marking script sets) and clickability are read
    # from the snapshot: leaving out DOM rects halves its size on large pages.
    snapshot = await cdp.send(
        "DOMSnapshot.captureSnapshot",
        {"computedStyles": [], "includeDOMRects": False, "includePaintOrder": False},
    )
    for document in snapshot["documents"]:
        document["layout"].setdefault("clientRects", [])
    pop_bids_from_attribute(snapshot, "aria-roledescription")
    pop_bids_from_attribute(snapshot, "aria-description")
    return snapshot


async def _merged_axtree(cdp: CDPSender) -> dict[str, Any]:
    """The AXTrees of every frame, with each iframe node pointing at its frame's root."""
    frame_tree = await cdp.send("Page.getFrameTree")
    frame_ids: list[str] = []
    pending = [frame_tree["frameTree"]]
    while pending:
        frame = pending.pop()
        pending.extend(frame.get("childFrames", []))
        frame_ids.append(frame["frame"]["id"])
    trees = await asyncio.gather(
        *(cdp.send("Accessibility.getFullAXTree", {"frameId": fid}) for fid in frame_ids)
    )
    by_frame = dict(zip(frame_ids, trees, strict=True))
    merged: list[dict[str, Any]] = []
    for tree in trees:
        for node in tree["nodes"]:
            _extract_bid(node)
        merged.extend(tree["nodes"])
    for tree in trees:
        for node in tree["nodes"]:
            if node["role"].get("value") != "Iframe" or "backendDOMNodeId" not in node:
                continue
            described = await cdp.send(
                "DOM.describeNode", {"backendNodeId": node["backendDOMNodeId"]}
            )
            frame_id = described.get("node", {}).get("frameId")
            if frame_id in by_frame and by_frame[frame_id]["nodes"]:
                node.setdefault("childIds", []).append(by_frame[frame_id]["nodes"][0]["nodeId"])
    return {"nodes": merged}


def _extract_bid(node: dict[str, Any]) -> None:
    """Move the bid that marking stored in an ARIA property onto the node."""
    items: list[str] = []
    for i, prop in enumerate(node.get("properties", [])):
        if prop["name"] == "roledescription":
            items, rest = extract_data_items_from_aria(prop["value"]["value"])
            prop["value"]["value"] = rest
            if rest == "":
                del node["properties"][i]
            break
    if "description" in node:
        fallback, rest = extract_data_items_from_aria(node["description"]["value"])
        node["description"]["value"] = rest
        if rest == "":
            del node["description"]
        items = items or fallback
    if items:
        node["browsergym_id"] = items[0]


async def _focused_bid(page: Page) -> str:
    """The bid of the focused element, looking inside focused iframes."""
    frame: Frame | None = page.main_frame
    bid = ""
    while frame is not None:
        found = await frame.evaluate(own_js("focused_element.js"), BID_ATTRIBUTE)
        bid = found["bid"] or bid
        if not (found["isFrame"] and found["bid"]):
            break
        handle = await frame.query_selector(f'[{BID_ATTRIBUTE}="{found["bid"]}"]')
        frame = await handle.content_frame() if handle else None
    return bid


async def _screenshot(cdp: CDPSender) -> bytes | None:
    try:
        shot = await cdp.send("Page.captureScreenshot", {"format": "png"})
    except (PlaywrightError, BrowserError) as exc:
        log.warning("screenshot failed", error=str(exc).splitlines()[0])
        return None
    return base64.b64decode(shot["data"])


async def _safe_title(page: Page) -> str:
    try:
        return await page.title()
    except PlaywrightError:
        return ""
