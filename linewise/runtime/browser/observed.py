"""The documents the model last observed: the marking's record of each.

The marking (``js/mark_elements.js``) returns, for each frame it marks, a record of the
elements it marked there, by bid; linewise keeps that record as a Playwright handle.
A handle belongs to the execution context of the document it was made in: Playwright
refuses to use it in any other document (the check is in its driver, out of the page's
reach), and no page global reaches the object. The next marking of the same document
gets its record back and keeps an element's bid only if the record holds that very
element under it: what a page wrote under the attribute (it can see the marking write
it) decides nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Frame, JSHandle, Page


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
        """The documents of a new observation of ``page`` (None: Chromium's error page,
        nothing marked); the old records are released."""
        old = [d.record for d in self._documents.values()]
        self.page, self._documents = page, dict(documents)
        await release([r for r in old if all(r is not d.record for d in documents.values())])


async def release(records: list[JSHandle]) -> None:
    """Let the page's memory go of records no longer used (best effort: a record of a
    document that is gone went with it)."""
    async def one(record: JSHandle) -> None:
        try:
            await record.dispose()
        except PlaywrightError:
            pass

    await asyncio.gather(*(one(r) for r in records))
