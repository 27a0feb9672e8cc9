"""Enforcing the navigation policy in the browser, whoever starts the navigation.

``NavigationGuard`` watches one episode's browser context (async Playwright; BrowserGym's
sync twin is ``sync_guard.py``, and every decision both make is in ``guard_rules.py``):

* the policy proxy (``proxy.py``): every connection the context opens — sub-resources,
  the hops of their redirect chains, WebSockets, workers' fetches — is checked by host
  and port with the address rules before it is made;
* a route on every request of every page of the context (popups and ``window.open``
  targets included): documents and frames go through ``NavigationPolicy.refusal``.
  Playwright calls a route handler only for the first URL of a redirect chain, so the
  guard fetches a document itself hop by hop (``max_redirects=0``, within the navigation
  timeout), checks every ``Location`` against the policy, and either aborts (nothing
  past the refused hop is ever requested) or hands the browser one redirect to the
  chain's final URL;
* a watcher of committed frame navigations, for what never becomes a routed request
  (``blob:`` and ``data:`` documents, Chromium's own pages): a refused main frame goes
  back, a refused popup is closed, a refused iframe is emptied; the blank tab a
  ``window.open`` Chromium refused itself (``data:``) is closed too;
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

from linewise.records import BlockedNavigation, DownloadRecord, NavigationInitiator
from linewise.runtime.browser import guard_rules as rules
from linewise.runtime.browser.navigation import ChainEnd, NavigationPolicy, redirect_chain
from linewise.runtime.browser.proxy import ProxyHub, ProxyLimits, ProxyServer
from linewise.runtime.browser.resolver import Resolver
from linewise.runtime.redaction import redact_text

log = structlog.get_logger(__name__)

SETTLE_TIMEOUT_S = 5.0
POPUP_WAIT_ROUNDS = 20
DOWNLOADS_FOLDER = "downloads"
DEFAULT_NAVIGATION_TIMEOUT_MS = 30000.0


class NavigationGuard(rules.GuardRecords):
    """The policy of one episode, enforced on its browser context; documents are
    fetched within ``navigation_timeout_ms``."""

    def __init__(self, policy: NavigationPolicy, episode_dir: Path | None = None,
                 navigation_timeout_ms: float = DEFAULT_NAVIGATION_TIMEOUT_MS) -> None:
        super().__init__()
        self.policy: NavigationPolicy = policy
        self.navigation_timeout_ms = navigation_timeout_ms
        self.downloads_dir = (
            episode_dir / DOWNLOADS_FOLDER if policy.downloads and episode_dir else None
        )
        self._context: BrowserContext | None = None
        self._going_back = asyncio.Lock()  # one tab's undo at a time: navigations interrupt
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def accept_downloads(self) -> bool:
        return self.downloads_dir is not None

    def open_proxy(self, resolver: Resolver | None = None, limits: ProxyLimits | None = None
                   ) -> ProxyServer | None:
        """The proxy the context must use (None with the policy off)."""
        if not self.policy.enforce:
            return None
        return ProxyHub.shared().serve(self.connection_refusal, resolver, limits)

    async def attach(self, context: BrowserContext) -> None:
        """Watch ``context``; call before its first page opens."""
        self._context = context
        if self.policy.enforce:
            await context.route("**/*", self._route)
        context.on("page", self._on_page)
        context.on("console", self._on_console)  # once per context: see BrowserSession

    async def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Wait (bounded) until the watcher has undone what it caught (going back,
        closing a popup) and pending downloads are saved or refused."""
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=timeout_s)
            if pending:
                log.warning("navigation guard still busy", tasks=len(pending))
        if self.policy.enforce:
            await self._empty_refused_tabs()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ the network side

    async def _route(self, route: Route) -> None:
        request = route.request
        try:
            frame = _frame_of(request)
            navigation = request.is_navigation_request()
            initiator = await _initiator(frame) if navigation else "page"
            plan = rules.plan_route(self.policy, request.url, navigation=navigation,
                              initiator=initiator)
            if plan.action == "continue":
                await route.continue_()
            elif plan.action == "blocked":
                assert plan.reason is not None
                self.record_refused_connection(rules.request_host(request.url), plan.reason)
                await route.abort("blockedbyclient")
            elif plan.action == "refused":
                assert plan.reason is not None
                await self._refuse(route, frame, request.url, plan.reason, initiator)
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
        self.record(BlockedNavigation(url=url, reason=reason, initiator=initiator,
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
                    if (candidate.url in rules.BLANK_PAGES and len(context.pages) > 1
                            and await candidate.opener() is not None):
                        await candidate.close()
                        return
                except PlaywrightError:
                    return
            await asyncio.sleep(0.05)

    async def _load_checking_redirects(self, route: Route, frame: Frame | None) -> None:
        url = route.request.url
        try:
            first = await route.fetch(max_redirects=0, timeout=self.navigation_timeout_ms)
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
        outcome = rules.chain_outcome(end)
        if outcome.action == "first":
            await route.fulfill(response=first)
            return
        await first.dispose()
        if outcome.action == "refused":
            assert end.refusal is not None
            await self._refuse(route, frame, end.url, end.refusal, "redirect",
                               from_url=end.previous)
        elif outcome.action == "failed":
            await route.abort("failed")
        else:
            await route.fulfill(status=outcome.status, headers={"location": outcome.location})

    async def _fetch_hop(self, route: Route, url: str, keeps_method: bool) -> APIResponse:
        timeout = self.navigation_timeout_ms
        if keeps_method:  # 307/308 repeat the method and body
            return await route.fetch(url=url, max_redirects=0, timeout=timeout)
        assert self._context is not None
        return await self._context.request.fetch(url, method="GET", max_redirects=0,
                                                 timeout=timeout)

    # ------------------------------------------------------------------ the page side

    def _on_page(self, page: Page) -> None:
        page.on("framenavigated", self._on_frame_navigated)
        page.on("download", lambda download: self._spawn(self._on_download(download)))

    def _on_console(self, message: ConsoleMessage) -> None:
        page_url = message.page.url if message.page else ""
        if self.record_chromium_refusal(message.type, message.text, page_url):
            self._spawn(self._close_blank_popups(None))

    def _on_frame_navigated(self, frame: Frame) -> None:
        url = frame.url
        reason = rules.committed_refusal(self.policy, url)
        if reason is not None:
            self._spawn(self._undo(frame, url, reason))

    async def _undo(self, frame: Frame, url: str, reason: str) -> None:
        page = frame.page
        try:
            parent = frame.parent_frame
            action, initiator = rules.undo_action(
                is_iframe=parent is not None,
                is_popup=await page.opener() is not None and len(page.context.pages) > 1)
            self.record(BlockedNavigation(url=url, reason=reason, initiator=initiator,
                                          from_url=parent.url if parent is not None else ""))
            if action == "empty_frame":
                await (await frame.frame_element()).evaluate(rules.EMPTY_FRAME_JS)
            elif action == "close_popup":
                await page.close()
            else:
                await self._take_back(page)
        except PlaywrightError as exc:
            log.debug("could not undo a blocked navigation", url=url[:200],
                      error=str(exc)[:200])

    async def _take_back(self, page: Page) -> None:
        """Go back from a refused document; where going back fails, lands on a refused
        document, or lands on a page that already sent the tab to one (a page that
        bounces would loop for the rest of the episode), the tab is emptied instead."""
        async with self._going_back:
            went_back = True
            try:
                await page.go_back(wait_until="commit")
            except PlaywrightError as exc:
                went_back = False
                log.debug("could not go back from a blocked navigation", error=str(exc)[:200])
            if page.is_closed():
                return
            if rules.must_empty_after_going_back(self.policy, page.url, self._bounced_from,
                                                 went_back=went_back):
                await page.goto("about:blank", wait_until="commit")

    async def _empty_refused_tabs(self) -> None:
        """The last word before an observation: no tab is left showing a refused document,
        whatever order the browser's events arrived in."""
        for page in list(self._context.pages) if self._context is not None else []:
            if rules.committed_refusal(self.policy, page.url) is None:
                continue
            # An undo still going back holds the lock: what it leaves is what counts.
            async with self._going_back:
                if page.is_closed() or rules.committed_refusal(self.policy, page.url) is None:
                    continue
                log.info("a tab still showed a refused document", url=page.url[:200])
                try:
                    await page.goto("about:blank", wait_until="commit")
                except PlaywrightError as exc:
                    log.debug("could not empty a tab", error=str(exc)[:200])

    async def _on_download(self, download: Download) -> None:
        url, name = download.url, download.suggested_filename
        reason = rules.download_refusal(self.policy, url, can_save=self.downloads_dir is not None)
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
        self.record_download(record)


def _frame_of(request: Request) -> Frame | None:
    """The request's frame; None for a popup's first request, sent before its frame
    exists."""
    try:
        return request.frame
    except PlaywrightError:
        return None


async def _initiator(frame: Frame | None) -> NavigationInitiator:
    if frame is None or frame.parent_frame is not None:
        return rules.initiator_of(has_frame=frame is not None, is_iframe=frame is not None,
                            blank_with_opener=False)
    blank = frame.url in rules.BLANK_PAGES and await frame.page.opener() is not None
    return rules.initiator_of(has_frame=True, is_iframe=False, blank_with_opener=blank)


def _safe_filename(name: str) -> str:
    """A name fit for the episode folder, made from the suggested name with every secret
    already replaced by its placeholder: squeezed to ``[A-Za-z0-9._-]``, a secret's
    value would be a spelling no redactor can tell (``S3cr~t*P@ss`` as ``S3cr_t_P_ss``)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(redact_text(name)).name).strip("._")
    return cleaned[:120] or "download"


def _free_path(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    candidate, stem, suffix, n = folder / name, Path(name).stem, Path(name).suffix, 1
    while candidate.exists():
        n += 1
        candidate = folder / f"{stem}-{n}{suffix}"
    return candidate
