"""Reading a live page into an ``Observation``: marking, AXTree and DOM snapshot over CDP.

Extraction follows BrowserGym: its marking script (in linewise's own version,
``js/mark_elements.js``, which no page can steer) gives every element a stable ``bid``
and smuggles it into the accessibility tree through an ARIA attribute; the CDP
accessibility trees of all frames are merged; the DOM snapshot supplies visibility,
bounding boxes and clickability; and browsergym-core's ``flatten_axtree_to_str`` turns
the tree into indented lines. Everything here is async Playwright, so it runs inside
the asyncio loop (BrowserGym's own env is sync and cannot). The flattening itself is
``observation.flatten_axtree``, shared with the BrowserGym environment.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import browsergym.core.observation as browsergym_observation
import structlog
from browsergym.core.observation import (
    extract_data_items_from_aria,
    extract_dom_extra_properties,
    pop_bids_from_attribute,
)
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Frame, JSHandle, Page

from linewise.errors import BrowserError, BrowserStalled, ObservationError
from linewise.records import SkippedFrame, Tab, TargetBox
from linewise.runtime.browser.binding import DocumentBinding, paint_boxes
from linewise.runtime.browser.cdp import CDPSender
from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.browser.observation import (
    ElementProperties,
    InvisibleTextMode,
    Observation,
    apply_invisible_text,
    flatten_axtree,
)
from linewise.runtime.browser.observed import MarkedDocument, ObservedDocuments, release
from linewise.runtime.browser.scripts import browsergym_js, own_js

log = structlog.get_logger(__name__)

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


T = TypeVar("T")

# Chromium never answers Page.captureScreenshot when the tab navigates away while it
# waits for a frame to paint: a screenshot is given up after this, not the observation.
_SCREENSHOT_TIMEOUT_S = 5.0

# Chromium shows a refused or failed frame source (file://, chrome://, a dead host) as an
# error page whose scripts never run: evaluating in it would wait forever.
_DEAD_FRAME_PREFIXES = ("chrome-error://",)


def _is_dead(frame: Frame) -> bool:
    return frame.url.startswith(_DEAD_FRAME_PREFIXES)


@dataclass
class _FrameDeadlines:
    """Every script run in a frame gets ``timeout_s``; a frame that misses it is left out
    of this observation (and of its clean-up) and recorded."""

    timeout_s: float
    skipped: dict[Frame, SkippedFrame] = field(default_factory=dict)

    def skip(self, frame: Frame, reason: str) -> None:
        if frame not in self.skipped:
            log.info("frame skipped", url=frame.url, reason=reason)
            self.skipped[frame] = SkippedFrame(url=frame.url, reason=reason)

    def usable(self, frame: Frame) -> bool:
        if frame in self.skipped or frame.is_detached():
            return False
        if _is_dead(frame):
            self.skip(frame, "Chromium refused or could not load the frame's source")
            return False
        return True

    async def run(self, frame: Frame, work: Awaitable[T]) -> T | None:
        """``work`` in ``frame`` within the deadline; None (frame skipped) if it misses it."""
        try:
            return await asyncio.wait_for(work, self.timeout_s)
        except TimeoutError:
            self.skip(frame, f"its scripts did not answer within {self.timeout_s:g} s")
            return None


async def observe(
    session: BrowserSession,
    *,
    screenshot: bool = True,
    frame_timeout_s: float = 2.0,
    invisible_text: InvisibleTextMode = "keep",
    crop: bool = False,
) -> Observation:
    """Mark the active tab, read its AXTree and DOM snapshot, and flatten them.
    ``crop``: cut the screenshot to the page's visible content (``crop_to_content``).

    A frame whose scripts do not answer within ``frame_timeout_s`` is skipped (its
    content stays unmarked) and listed in ``Observation.skipped_frames``. Text a person
    cannot see is dropped, marked or kept as ``invisible_text`` says
    (``observation.apply_invisible_text``).
    """
    started = time.perf_counter()
    page = await session.ensure_page()
    frames = _FrameDeadlines(frame_timeout_s)
    stopped_loading = False
    invisible: dict[str, str] | None = {} if invisible_text != "keep" else None
    marked: dict[str, MarkedDocument] = {}
    for attempt in range(_MAX_TRIES):
        last = attempt == _MAX_TRIES - 1
        try:
            if _is_dead(page.main_frame):
                await session.observed.replace(None, {})
                return await _error_page_observation(session, page, started, frame_timeout_s)
            if page.main_frame in frames.skipped:
                raise _main_frame_stalled(page, frame_timeout_s)
            if not frames.usable(page.main_frame):
                # Chromium's own error page (a server that refused or dropped the
                # connection) runs no page scripts: the agent is told, and can go back.
                await session.observed.replace(None, {})
                return await _error_page_observation(session, page, started, frame_timeout_s)
            if invisible is not None:
                invisible.clear()
            await release([d.record for d in marked.values()])
            marked = {}
            marking = _Marking(session.bid_attribute, session.observed, marked)
            await _mark_frames(page.main_frame, "", frames, marking,
                               lenient=last, invisible=invisible)
            if page.main_frame in frames.skipped:
                if stopped_loading or last:
                    raise _main_frame_stalled(page, frame_timeout_s)
                # A navigation still waiting on a server that never answers keeps the
                # old document from running scripts: stop it and read what is there.
                stopped_loading = True
                del frames.skipped[page.main_frame]
                cdp = await session.cdp(page)
                await asyncio.wait_for(cdp.send("Page.stopLoading"), frame_timeout_s)
                continue
            cdp = await session.cdp(page)
            dom, axtree = await asyncio.gather(
                _dom_snapshot(cdp, session.bid_attribute), _merged_axtree(cdp)
            )
            focused = await _focused_bid(page, frames, session.bid_attribute)
            await session.binding.bind(page, cdp, session.bid_attribute)
            await session.observed.replace(page, marked)
            break
        except BrowserStalled:
            raise
        except (PlaywrightError, BrowserError) as exc:
            message = str(exc)
            if last or not any(m in message for m in _TRANSIENT_ERRORS):
                await release([d.record for d in marked.values()])
                raise ObservationError(f"Could not read the page at {page.url}: {message}") from exc
            log.debug("observation retry", attempt=attempt, error=message.splitlines()[0])
            await asyncio.sleep(0.2)
        finally:
            await _unmark_frames(page, frames)

    raw_elements = extract_dom_extra_properties(dom, scale_factor=1.0)
    elements = {
        bid: ElementProperties(props["visibility"], props["clickable"])
        for bid, props in raw_elements.items()
    }
    hidden = apply_invisible_text(axtree, invisible or {}, invisible_text)
    lines = flatten_axtree(axtree, elements)
    png = await _screenshot(cdp, page, session.binding) if screenshot else None
    clip = None
    if png is not None and crop:
        png, clip = await crop_to_content(page, png)
    tabs = [
        Tab(index=i, url=p.url, title=await _safe_title(p, frame_timeout_s), active=p is page)
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
        screenshot_clip=clip,
        extraction_ms=(time.perf_counter() - started) * 1000,
        skipped_frames=list(frames.skipped.values()),
        invisible=hidden,
    )


async def _error_page_observation(
    session: BrowserSession, page: Page, started: float, frame_timeout_s: float
) -> Observation:
    """The observation of a tab showing Chromium's error page instead of a document."""
    tabs = [
        Tab(index=i, url=p.url, title=await _safe_title(p, frame_timeout_s), active=p is page)
        for i, p in enumerate(session.pages)
    ]
    return Observation(
        url=page.url,
        title="",
        tabs=tabs,
        lines=[
            "RootWebArea 'Error'",
            "\tStaticText 'This page could not be loaded (the server refused, dropped or "
            "never answered the connection). Go back or open another page.'",
        ],
        extraction_ms=(time.perf_counter() - started) * 1000,
    )


def _main_frame_stalled(page: Page, timeout_s: float) -> BrowserStalled:
    return BrowserStalled("observe", timeout_s, f"the page at {page.url} runs no script")


@dataclass
class _Marking:
    """One marking of a tab: the private attribute, the records of the last observation
    (passed back to the marking of the same documents), and the new records."""

    attribute: str
    observed: ObservedDocuments
    documents: dict[str, MarkedDocument]

    async def mark(self, frame: Frame, frame_bid: str) -> JSHandle:
        """Mark ``frame``'s document, keeping the bids of the elements the last marking of
        that same document recorded; its record of elements by bid."""
        script = own_js("mark_elements.js")
        previous = self.observed.previous(frame)
        if previous is not None:
            try:
                return await frame.evaluate_handle(script, [frame_bid, self.attribute, previous])
            except PlaywrightError as exc:
                # The frame holds another document now (Playwright refuses a handle of
                # one document in another): its marking starts afresh.
                if "context" not in str(exc) and "disposed" not in str(exc):
                    raise
        return await frame.evaluate_handle(script, [frame_bid, self.attribute, None])


async def _mark_frames(
    frame: Frame,
    frame_bid: str,
    frames: _FrameDeadlines,
    marking: _Marking,
    *,
    lenient: bool,
    invisible: dict[str, str] | None = None,
) -> None:
    attribute = marking.attribute
    if not frames.usable(frame):
        return
    await frames.run(frame, frame.evaluate(own_js("render_skipped_content.js")))
    if frame in frames.skipped:
        return
    record = await frames.run(frame, marking.mark(frame, frame_bid))
    if record is None:
        return
    marking.documents[frame_bid] = MarkedDocument(frame, record)
    if invisible is not None:
        # Judging visibility is a defense, not a reading of the page: a frame too slow
        # for it keeps its text (and is still observed) rather than failing the step.
        try:
            found = await asyncio.wait_for(
                frame.evaluate(own_js("invisible_text.js"), attribute), frames.timeout_s
            )
            invisible.update(found or {})
        except TimeoutError:
            log.warning("invisible text not judged in time; kept", frame=frame.url)
    children = []
    for child in frame.child_frames:
        if not frames.usable(child):
            continue
        child_bid = await frames.run(child, _child_frame_bid(child, attribute))
        if child in frames.skipped or child_bid == "":
            continue
        if child_bid is None:
            if lenient:
                continue
            raise ObservationError("Cannot mark a child frame without a bid")
        children.append(
            _mark_frames(child, child_bid, frames, marking, lenient=lenient,
                         invisible=invisible)
        )
    await asyncio.gather(*children)


async def _child_frame_bid(child: Frame, attribute: str) -> str | None:
    """The bid of the element holding ``child``; "" for frames that are not marked."""
    element = await child.frame_element()
    if await element.content_frame() != child:
        return ""  # e.g. the PDF viewer inside an <embed>
    sandbox = await element.get_attribute("sandbox")
    if sandbox is not None and "allow-scripts" not in sandbox.split():
        return ""
    return await element.get_attribute(attribute)


async def _unmark_frames(page: Page, frames: _FrameDeadlines) -> None:
    # Runs in a ``finally``, also after a cancellation: a frame that did not answer
    # before is never waited on again, and every other one only within its deadline.
    script = browsergym_js("frame_unmark_elements.js")
    for frame in page.frames:
        if not frames.usable(frame):
            continue
        try:
            await frames.run(frame, frame.evaluate(script))
        except PlaywrightError:
            continue  # detached or script-blocked frames keep nothing of ours that matters


async def _dom_snapshot(cdp: CDPSender, attribute: str) -> dict[str, Any]:
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
    read_bids_from(snapshot, attribute)
    return snapshot


PAGE_BID = "bid (the page's own)"
"""What a page's own attribute of BrowserGym's name is renamed to before it reads bids."""


def read_bids_from(snapshot: dict[str, Any], attribute: str) -> None:
    """Make BrowserGym's snapshot reader, which reads ids from the attribute its module
    constant names (``bid``, or the BrowserGym env's private name once that env is
    installed), read them from this episode's private ``attribute`` instead, and never
    from an attribute the page set itself.

    Names and values share the snapshot's string table: renaming its entries changes
    only this copy, which is read for visibility and clickability alone."""
    read_by_browsergym = browsergym_observation.BID_ATTR
    strings: list[str] = snapshot["strings"]
    for i, text in enumerate(strings):
        if text == read_by_browsergym:
            strings[i] = PAGE_BID
        elif text == attribute:
            strings[i] = read_by_browsergym


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


async def _focused_bid(page: Page, frames: _FrameDeadlines, attribute: str) -> str:
    """The bid of the focused element, looking inside focused iframes."""
    frame: Frame | None = page.main_frame
    bid = ""
    while frame is not None and frames.usable(frame):
        found = await frames.run(
            frame, frame.evaluate(own_js("focused_element.js"), attribute)
        )
        if found is None:
            break
        bid = found["bid"] or bid
        if not (found["isFrame"] and found["bid"]):
            break
        handle = await frame.query_selector(f'[{attribute}="{found["bid"]}"]')
        frame = await handle.content_frame() if handle else None
    return bid


async def _screenshot(cdp: CDPSender, page: Page, binding: DocumentBinding) -> bytes | None:
    """The viewport, with password fields, fields a secret was typed into and text that
    holds a secret masked twice: fields hidden by a style sheet while it is captured
    (also in same-origin frames), and everything painted over from the boxes the
    observed document's private world finds (``binding.py``), which no frame, style or
    page script can undo. The boxes are read before the capture, once the animations of
    what shows a secret are paused and have reached the compositor, and again after
    it, and both readings are painted: a field an animation or a script moves is
    covered where the capture saw it. A page that cannot be masked is not shot."""
    measured = False
    try:
        await asyncio.wait_for(page.evaluate(own_js("mask_secret_fields.js"), True),
                               _SCREENSHOT_TIMEOUT_S)
        measured = True
        before, width = await asyncio.wait_for(binding.boxes(page, "before"),
                                               _SCREENSHOT_TIMEOUT_S)
        shot = await asyncio.wait_for(cdp.send("Page.captureScreenshot", {"format": "png"}),
                                      _SCREENSHOT_TIMEOUT_S)
        measured = False
        after, width_after = await asyncio.wait_for(binding.boxes(page, "after"),
                                                    _SCREENSHOT_TIMEOUT_S)
        png = base64.b64decode(shot["data"])
        boxes = [*before, *(box for box in after if box not in before)]
        if before and after and sorted(before) != sorted(after):
            log.info("secret boxes moved during the screenshot; both places are masked")
        return paint_boxes(png, boxes, width or width_after) if boxes else png
    except (PlaywrightError, BrowserError, TimeoutError) as exc:
        log.warning("screenshot failed", error=(str(exc) or "timed out").splitlines()[0])
        return None
    finally:
        with contextlib.suppress(PlaywrightError, BrowserError, TimeoutError):
            if measured:  # let the paused animations run on
                await asyncio.wait_for(binding.boxes(page, "after"), _SCREENSHOT_TIMEOUT_S)
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await asyncio.wait_for(page.evaluate(own_js("mask_secret_fields.js"), False),
                                   _SCREENSHOT_TIMEOUT_S)


CROP_MARGIN_PX = 8
"""CSS pixels kept around the content's box: its edges stay visible."""

CROP_MIN_SAVING = 0.25
"""A cut that keeps more than 1 - this of the image is not made: it would shift the
screenshot's coordinates for nothing."""


async def crop_to_content(page: Page, png: bytes) -> tuple[bytes, TargetBox | None]:
    """``png`` (a viewport screenshot, secrets already masked) cut to the box of what
    the page shows (``js/content_box.js``) with a margin, and that part of the viewport
    in CSS pixels; the screenshot whole (and None) when the page shows nothing, fills
    most of the viewport, or cannot be measured."""
    try:
        box = await asyncio.wait_for(page.evaluate(own_js("content_box.js")),
                                     _SCREENSHOT_TIMEOUT_S)
    except (PlaywrightError, TimeoutError) as exc:
        log.info("screenshot not cropped", error=(str(exc) or "timed out").splitlines()[0])
        return png, None
    return crop_png(png, box) if box else (png, None)


def crop_png(png: bytes, box: dict[str, float]) -> tuple[bytes, TargetBox | None]:
    """``png`` cut to ``box`` (``content_box.js``'s: CSS pixels of a viewport
    ``viewport_width`` wide) widened by ``CROP_MARGIN_PX``, and the part of the viewport
    kept; the image whole and None when the cut would save little."""
    from PIL import Image  # browsergym-core's dependency; only with screenshots

    image = Image.open(io.BytesIO(png))
    width, height = float(box["viewport_width"]), float(box["viewport_height"])
    left = max(0.0, box["x"] - CROP_MARGIN_PX)
    top = max(0.0, box["y"] - CROP_MARGIN_PX)
    right = min(width, box["x"] + box["width"] + CROP_MARGIN_PX)
    bottom = min(height, box["y"] + box["height"] + CROP_MARGIN_PX)
    if (right - left) * (bottom - top) > (1 - CROP_MIN_SAVING) * width * height:
        return png, None
    scale = image.width / width if width else 1.0
    cut = image.crop((round(left * scale), round(top * scale),
                      round(right * scale), round(bottom * scale)))
    out = io.BytesIO()
    cut.save(out, format="PNG")
    return out.getvalue(), TargetBox(x=left, y=top, width=right - left, height=bottom - top)


async def _safe_title(page: Page, timeout_s: float) -> str:
    try:
        return await asyncio.wait_for(page.title(), timeout_s)
    except (PlaywrightError, TimeoutError):
        return ""
