"""The documents the model last observed, and the elements actions may reach in them.

The marking (``js/mark_elements.js``) returns, for each frame it marks, a record of the
elements it marked there, by bid; linewise keeps that record as a Playwright handle.
A handle belongs to the execution context of the document it was made in: Playwright
refuses to use it in any other document (the check is in its driver, out of the page's
reach), and once that document is gone (the tab navigated, the frame was replaced) it
answers nothing. So an action that names a bid resolves it from the record of the
document the model observed, and gets that document's element or a refusal:

- the tab is the one observed (a popup or a page's own tab switch is not),
- the frame still holds the observed document, at the observed origin,
- the element is the one the marking recorded under that bid, still in that document.

Nothing is looked up by the attribute the marking writes, which a page can see and copy:
elements a page plants under it, in its own document or on another host it navigated to,
are never reached. The action then runs on the resolved element's own handle, which
Playwright refuses to use once its document is gone: a navigation after the check fails
the action, it does not move it to the new page.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog
from playwright.async_api import ElementHandle, Frame, JSHandle, Page
from playwright.async_api import Error as PlaywrightError

from linewise.errors import ActionError, ElementNotFound

log = structlog.get_logger(__name__)

RESOLVE_JS = """(state, wanted) => {
    const bid = wanted[0];
    if (location.origin !== state.origin) return 'moved ' + location.href;
    const el = state.elements[bid];
    if (el === undefined) return 'missing';
    if (!el.isConnected || el.ownerDocument !== document) return 'detached';
    return el;
}"""
"""Runs in the observed document (its record's context): its answer is the element, or
why not."""

URL_SHOWN = 200
"""How much of a URL an error quotes."""


def page_changed(why: str) -> ActionError:
    """The error of an action whose document is no longer the one observed."""
    return ActionError(f"The page changed since it was observed: {why}. Nothing was done; "
                       "observe the page again (the next step shows it as it is now).")


def frame_prefix(bid: str) -> str:
    """The bid of the frame element ``bid`` lives in: ``"aB"`` for ``"aB12"``, ``""`` for
    the page's own document (frames are letters, the first lower-case, the rest
    upper-case)."""
    end = 0
    while end < len(bid) and bid[end].isalpha():
        end += 1
        while end < len(bid) and bid[end].isupper():
            end += 1
    return bid[:end]


@dataclass
class MarkedDocument:
    """One frame's document as the marking left it: its record of elements by bid."""

    frame: Frame
    record: JSHandle


class ObservedDocuments:
    """The records of the last observation of one episode's active tab, by frame bid."""

    def __init__(self) -> None:
        self.page: Page | None = None
        self._documents: dict[str, MarkedDocument] = {}

    def previous(self, frame: Frame) -> JSHandle | None:
        """The record the last observation made of ``frame``'s document, for the next
        marking (which uses it only if the frame still holds that document)."""
        for document in self._documents.values():
            if document.frame is frame:
                return document.record
        return None

    async def replace(self, page: Page | None, documents: dict[str, MarkedDocument]) -> None:
        """The documents of a new observation of ``page`` (None: nothing can be acted on,
        e.g. Chromium's error page); the old records are released."""
        old = [d.record for d in self._documents.values()]
        self.page, self._documents = page, dict(documents)
        await release([r for r in old if all(r is not d.record for d in documents.values())])

    async def element(self, bid: str, active: Page) -> ElementHandle:
        """The element the last observation marked ``bid`` in the document it observed;
        ``ActionError`` if that document is gone or is not the one in front, and
        ``ElementNotFound`` if the element is."""
        page = self.page
        if page is None:
            raise page_changed("it shows no page that can be acted on")
        if page.is_closed():
            raise page_changed("its tab was closed")
        if page is not active:
            raise page_changed(f"another tab is in front ({active.url[:URL_SHOWN]})")
        prefix = frame_prefix(bid)
        document = self._documents.get(prefix)
        if document is None:
            raise ElementNotFound(bid, f"its frame {prefix!r} is not on the page")
        try:
            found = await document.record.evaluate_handle(RESOLVE_JS, [bid])
        except PlaywrightError as exc:
            log.info("action refused: the observed document is gone", bid=bid,
                     error=str(exc).splitlines()[0][:200])
            where = "its frame" if prefix else "the tab"
            raise page_changed(f"{where} is now at {_url_of(document, page)[:URL_SHOWN]}"
                               ) from None
        element = found.as_element()
        if element is not None:
            return element
        why = str(await found.json_value())
        await found.dispose()
        if why == "missing":
            raise ElementNotFound(bid)
        if why == "detached":
            raise ElementNotFound(bid, "it was removed from the page since it was observed")
        raise page_changed(f"it is now at {why.removeprefix('moved ')[:URL_SHOWN]}")


def _url_of(document: MarkedDocument, page: Page) -> str:
    frame = document.frame
    return frame.url if not frame.is_detached() else page.url


async def release(records: list[JSHandle]) -> None:
    """Let the page's memory go of records no longer used (best effort: a record of a
    document that is gone went with it)."""
    async def one(record: JSHandle) -> None:
        try:
            await record.dispose()
        except PlaywrightError:
            pass

    await asyncio.gather(*(one(r) for r in records))
