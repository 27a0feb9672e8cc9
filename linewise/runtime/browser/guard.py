"""Enforcing the navigation policy in the browser, whoever starts the navigation.

``NavigationGuard`` watches one episode's browser context:

* a route on every request of every page of the context (popups and ``window.open``
  targets included): documents and frames go through ``NavigationPolicy.refusal``,
  sub-resources through its address rules only. Playwright calls a route handler only
  for the first URL of a redirect chain and lets the browser follow the rest unseen, so
  the guard fetches a document itself hop by hop (``max_redirects=0``), checks every
  ``Location`` against the policy, and either aborts (nothing past the refused hop is
  ever requested) or hands the browser one redirect to the chain's final URL;
* a watcher of committed frame navigations, for what never becomes a routed request
  (``blob:`` and ``data:`` documents, Chromium's own pages): a refused main frame goes
  back, a refused popup is closed, a refused iframe is emptied;
* downloads: refused, or saved into the episode folder's ``downloads/``.

Every refusal becomes a ``BlockedNavigation`` (url, reason, initiator); the environment
collects them per step with ``take_events`` and tells the model with ``take_notes``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import structlog
from playwright.async_api import (
    APIResponse,
    BrowserContext,
    ConsoleMessage,
    Download,
    Frame,
    Page,
    Request,
    Route,
)
from playwright.async_api import Error as PlaywrightError

from linewise.records import (
    BlockedNavigation,
    DownloadRecord,
    NavigationEvents,
    NavigationInitiator,
)
from linewise.runtime.browser.navigation import (
    ChainEnd,
    NavigationPolicy,
    redirect_chain,
)

log = structlog.get_logger(__name__)

SETTLE_TIMEOUT_S = 5.0
POPUP_WAIT_ROUNDS = 20
DOWNLOADS_FOLDER = "downloads"
DOWNLOADS_OFF = "downloads are off (the --downloads flag saves them in the episode folder)"

# The browser's own error page after a failed or aborted load: not a page's navigation.
BROWSER_PAGES = ("chrome-error://", "about:blank", "about:srcdoc")
_CHROMIUM_REFUSALS = ("Not allowed to load local resource:",
                      "Not allowed to navigate top frame to data URL:")


class NavigationGuard:
    """The policy of one episode, enforced on its browser context."""

    def __init__(self, policy: NavigationPolicy, episode_dir: Path | None = None) -> None:
        self.policy = policy
        self.downloads_dir = (
            episode_dir / DOWNLOADS_FOLDER if policy.downloads and episode_dir else None
        )
        self._context: BrowserContext | None = None
        self._events = NavigationEvents()
        self._unreported: list[BlockedNavigation] = []
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def accept_downloads(self) -> bool:
        return self.downloads_dir is not None

    async def attach(self, context: BrowserContext) -> None:
        """Watch ``context``; call before its first page opens."""
        self._context = context
        if self.policy.enforce:
            await context.route("**/*", self._route)
        context.on("page", self._on_page)
        context.on("console", self._on_console)  # once per context: see BrowserSession

    # ------------------------------------------------------------------ the model's side

    def check_model_url(self, url: str, from_url: str = "") -> str | None:
        """The refusal of a URL the model asked for (recorded), or None if allowed."""
        reason = self.policy.refusal(url)
        if reason is not None:
            self._record(BlockedNavigation(url=url, reason=reason, initiator="model",
                                           from_url=from_url), tell_model=False)
        return reason

    async def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Wait (bounded) until the watcher has undone what it caught (going back,
        closing a popup) and pending downloads are saved or refused."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(list(self._tasks), timeout=timeout_s)
        if pending:
            log.warning("navigation guard still busy", tasks=len(pending))

    def take_events(self) -> NavigationEvents:
        """Blocks and downloads since the last call."""
        events, self._events = self._events, NavigationEvents()
        return events

    def take_notes(self) -> list[BlockedNavigation]:
        """Blocks the model has not been told about (its own refusals are action errors)."""
        notes, self._unreported = self._unreported, []
        return notes

    def _record(self, block: BlockedNavigation, *, tell_model: bool = True) -> None:
        log.info("navigation blocked", url=block.url[:200], reason=block.reason,
                 initiator=block.initiator)
        self._events.blocked.append(block)
        if tell_model:
            self._unreported.append(block)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ the network side

    async def _route(self, route: Route) -> None:
        request = route.request
        try:
            if not request.is_navigation_request():
                reason = self.policy.subresource_refusal(request.url)
                if reason is None:
                    await route.continue_()
                else:
                    log.debug("sub-resource blocked", url=request.url[:200], reason=reason)
                    await route.abort("blockedbyclient")
                return
            frame = _frame_of(request)
            initiator = await _initiator(frame)
            reason = self.policy.refusal(request.url)
            if reason is not None:
                await self._refuse(route, frame, request.url, reason, initiator)
            elif not request.url.startswith(("http:", "https:")):
                await route.continue_()  # a file: page inside the task's folder
            else:
                await self._load_checking_redirects(route, frame)
        except PlaywrightError as exc:  # the page or context closed meanwhile
            log.debug("route handler gave up", url=request.url[:200], error=str(exc)[:200])

    async def _refuse(
        self, route: Route, frame: Frame | None, url: str, reason: str,
        initiator: NavigationInitiator, from_url: str | None = None,
    ) -> None:
        if from_url is None:
            from_url = frame.url if frame is not None else ""
        self._record(BlockedNavigation(url=url, reason=reason, initiator=initiator,
                                       from_url=from_url))
        # "aborted" (net::ERR_ABORTED) cancels the load without an error page: the frame
        # keeps the document it had.
        await route.abort("aborted")
        if initiator == "popup":
            self._spawn(self._close_blank_popups(frame.page if frame is not None else None))

    async def _close_blank_popups(self, page: Page | None) -> None:
        """Close the tab a refused popup left behind, so the agent stays on its own."""
        context = self._context
        assert context is not None
        for _ in range(POPUP_WAIT_ROUNDS):  # its page object may arrive after its request
            for candidate in [page] if page is not None else list(context.pages):
                try:
                    if (candidate.url in ("", "about:blank") and len(context.pages) > 1
                            and await candidate.opener() is not None):
                        await candidate.close()
                        return
                except PlaywrightError:
                    return
            await asyncio.sleep(0.05)

    async def _load_checking_redirects(self, route: Route, frame: Frame | None) -> None:
        url = route.request.url
        try:
            first = await route.fetch(max_redirects=0)
        except PlaywrightError as exc:
            log.debug("document fetch failed", url=url[:200], error=str(exc)[:200])
            await route.abort("failed")
            return
        chain = redirect_chain(self.policy, url, first.status, first.headers)
        try:
            hop_url, keeps_method = next(chain)
            while True:
                response = await self._fetch_hop(route, hop_url, keeps_method)
                await response.dispose()
                hop_url, keeps_method = chain.send((response.status, response.headers))
        except StopIteration as stop:
            end: ChainEnd = stop.value
        if end.hops == 0 and end.refusal is None:
            await route.fulfill(response=first)
            return
        await first.dispose()
        if end.refusal is not None:
            await self._refuse(route, frame, end.url, end.refusal, "redirect",
                               from_url=end.previous)
        elif end.exhausted:
            await route.abort("failed")
        else:
            # Every hop is allowed: the browser goes straight to the chain's end (it
            # fetches that URL once more itself, unrouted).
            await route.fulfill(status=307 if end.keeps_method else 303,
                                headers={"location": end.url})

    async def _fetch_hop(self, route: Route, url: str, keeps_method: bool) -> APIResponse:
        if keeps_method:  # 307/308 repeat the method and body
            return await route.fetch(url=url, max_redirects=0)
        assert self._context is not None
        return await self._context.request.fetch(url, method="GET", max_redirects=0)

    # ------------------------------------------------------------------ the page side

    def _on_page(self, page: Page) -> None:
        page.on("framenavigated", self._on_frame_navigated)
        page.on("download", lambda download: self._spawn(self._on_download(download)))

    def _on_console(self, message: ConsoleMessage) -> None:
        url = refused_by_chromium(message.type, message.text)
        if url is None:
            return
        reason = self.policy.refusal(url) or "Chromium does not let web pages open it"
        self._record(BlockedNavigation(url=url, reason=reason, initiator="page",
                                       from_url=message.page.url if message.page else ""))

    def _on_frame_navigated(self, frame: Frame) -> None:
        url = frame.url
        if not url or url.startswith(BROWSER_PAGES):
            return
        reason = self.policy.refusal(url)
        if reason is None:
            return
        self._spawn(self._undo(frame, url, reason))

    async def _undo(self, frame: Frame, url: str, reason: str) -> None:
        page = frame.page
        try:
            if frame.parent_frame is not None:
                self._record(BlockedNavigation(url=url, reason=reason, initiator="frame",
                                               from_url=frame.parent_frame.url))
                element = await frame.frame_element()
                await element.evaluate("(e) => { e.removeAttribute('srcdoc'); "
                                       "e.src = 'about:blank'; }")
            elif await page.opener() is not None and len(page.context.pages) > 1:
                self._record(BlockedNavigation(url=url, reason=reason, initiator="popup"))
                await page.close()
            else:
                self._record(BlockedNavigation(url=url, reason=reason, initiator="page"))
                if await page.go_back() is None and page.url == url:
                    await page.goto("about:blank")
        except PlaywrightError as exc:
            log.debug("could not undo a blocked navigation", url=url[:200],
                      error=str(exc)[:200])

    async def _on_download(self, download: Download) -> None:
        url, name = download.url, download.suggested_filename
        reason = self.policy.refusal(url) if url.startswith(("http:", "https:")) else None
        if reason is None and self.downloads_dir is None:
            reason = DOWNLOADS_OFF
        try:
            if reason is not None or self.downloads_dir is None:
                await download.cancel()
                record = DownloadRecord(url=url, filename=name, refused=reason)
            else:
                target = _free_path(self.downloads_dir, _safe_filename(name))
                await download.save_as(target)
                record = DownloadRecord(
                    url=url, filename=name, saved_as=f"{DOWNLOADS_FOLDER}/{target.name}"
                )
        except PlaywrightError as exc:
            record = DownloadRecord(url=url, filename=name, refused=f"failed: {exc.message}")
        log.info("download", url=url[:200], saved_as=record.saved_as, refused=record.refused)
        self._events.downloads.append(record)


def refused_by_chromium(kind: str, text: str) -> str | None:
    """The URL of a navigation Chromium itself refused, from a console message, or None.

    Chromium refuses a web page's navigations to file:, chrome: and top-level data: URLs
    before any request is made; its console error is the only trace of them."""
    if kind != "error":
        return None
    for prefix in _CHROMIUM_REFUSALS:
        if text.startswith(prefix):
            return text.removeprefix(prefix).strip()
    return None


def _frame_of(request: Request) -> Frame | None:
    """The request's frame; None for a popup's first request, sent before its frame
    exists."""
    try:
        return request.frame
    except PlaywrightError:
        return None


async def _initiator(frame: Frame | None) -> NavigationInitiator:
    if frame is None:
        return "popup"
    if frame.parent_frame is not None:
        return "frame"
    page = frame.page
    if frame.url in ("", "about:blank") and await page.opener() is not None:
        return "popup"
    return "page"


def _safe_filename(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).strip("._")
    return cleaned[:120] or "download"


def _free_path(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    candidate, stem, suffix, n = folder / name, Path(name).stem, Path(name).suffix, 1
    while candidate.exists():
        n += 1
        candidate = folder / f"{stem}-{n}{suffix}"
    return candidate
