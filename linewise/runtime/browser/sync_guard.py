"""The navigation policy on BrowserGym's own browser (sync Playwright, one worker thread).

BrowserGym's gym env creates its browser context and runs the task's set-up inside one
``reset`` call, so ``BrowserGymEnv`` wraps the task and calls ``attach`` on the set-up's
page before the set-up navigates. The rules are ``NavigationPolicy``'s, applied by the
same means as the async guard (``runtime/browser/guard.py``): a route on every request of
the context (documents and frames through ``refusal``, sub-resources through the address
rules, redirect chains checked hop by hop), a watcher of committed navigations for what
never becomes a request (``blob:``, ``data:``), Chromium's own refusals read from the
console, downloads refused and recorded. What differs:

* the policy is built from the first document the set-up loads: BrowserGym's tasks know
  their start URL only inside ``setup``, and the set-up itself is the task's, trusted;
* sync Playwright delivers events only while its thread is inside a Playwright call, so
  a page's navigation between two steps is routed when the next step starts;
* downloads are never saved (the context does not accept them).

The worker thread records; the asyncio side collects with ``take_events`` and
``take_notes``, under a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import structlog
from playwright.sync_api import BrowserContext, ConsoleMessage, Download, Frame, Page, Route
from playwright.sync_api import Error as PlaywrightError

from linewise.records import (
    BlockedNavigation,
    DownloadRecord,
    NavigationEvents,
    NavigationInitiator,
)
from linewise.runtime.browser.guard import BROWSER_PAGES, DOWNLOADS_OFF, refused_by_chromium
from linewise.runtime.browser.navigation import ChainEnd, NavigationPolicy, redirect_chain

log = structlog.get_logger(__name__)

CONTEXT_OPTIONS: dict[str, Any] = {"service_workers": "block", "accept_downloads": False}
"""BrowserGym's ``pw_context_kwargs``: a service worker would answer requests the route
never sees, and downloads are refused."""


class SyncNavigationGuard:
    """The policy of one BrowserGym episode, enforced on its (sync) browser context.

    ``policy_for`` builds the policy from the start URL once the set-up loads it;
    ``on_close`` runs after the guard closed the empty tab of a refused popup.
    """

    def __init__(self, policy_for: Callable[[str], NavigationPolicy],
                 on_close: Callable[[], None] = lambda: None) -> None:
        self._policy_for = policy_for
        self.on_close = on_close
        self.policy: NavigationPolicy | None = None
        self._lock = threading.Lock()
        self._events = NavigationEvents()
        self._unreported: list[BlockedNavigation] = []
        self._refused_popups = 0
        self._context: BrowserContext | None = None

    def attach(self, context: BrowserContext) -> None:
        """Watch ``context`` (on the worker thread, before the set-up navigates)."""
        self._context = context
        context.route("**/*", self._route)
        context.on("page", self._on_page)
        for page in context.pages:
            self._on_page(page)

    # ------------------------------------------------------------ the asyncio side

    def check_model_url(self, url: str, from_url: str = "") -> str | None:
        """The refusal of a URL the model asked for (recorded), or None if allowed."""
        reason = self.policy.refusal(url) if self.policy is not None else None
        if reason is not None:
            self._record(BlockedNavigation(url=url, reason=reason, initiator="model",
                                           from_url=from_url), tell_model=False)
        return reason

    def take_events(self) -> NavigationEvents:
        with self._lock:
            events, self._events = self._events, NavigationEvents()
        return events

    def take_notes(self) -> list[BlockedNavigation]:
        with self._lock:
            notes, self._unreported = self._unreported, []
        return notes

    def _record(self, block: BlockedNavigation, *, tell_model: bool = True) -> None:
        log.info("navigation blocked", url=block.url[:200], reason=block.reason,
                 initiator=block.initiator)
        with self._lock:
            self._events.blocked.append(block)
            if tell_model:
                self._unreported.append(block)

    # ------------------------------------------------------------ the network side

    def _start(self, url: str) -> NavigationPolicy:
        if self.policy is None:
            self.policy = self._policy_for(url)
            log.debug("navigation policy set from the start page", start_url=url[:200])
        return self.policy

    def _route(self, route: Route) -> None:
        request = route.request
        try:
            frame = _frame_of(request)
            if self.policy is None:
                if request.is_navigation_request() and frame is not None and (
                        frame.parent_frame is None):
                    self._start(request.url)
                route.continue_()
                return
            if not request.is_navigation_request():
                reason = self.policy.subresource_refusal(request.url)
                if reason is None:
                    route.continue_()
                else:
                    route.abort("blockedbyclient")
                return
            reason = self.policy.refusal(request.url)
            if reason is not None:
                self._refuse(route, frame, request.url, reason, _initiator(frame))
            elif not request.url.startswith(("http:", "https:")):
                route.continue_()
            else:
                self._load_checking_redirects(route, frame)
        except PlaywrightError as exc:  # the page or context closed meanwhile
            log.debug("route handler gave up", url=request.url[:200], error=str(exc)[:200])

    def _refuse(self, route: Route, frame: Frame | None, url: str, reason: str,
                initiator: NavigationInitiator, from_url: str | None = None) -> None:
        if from_url is None:
            from_url = frame.url if frame is not None else ""
        self._record(BlockedNavigation(url=url, reason=reason, initiator=initiator,
                                       from_url=from_url))
        route.abort("aborted")
        if initiator == "popup":
            page = frame.page if frame is not None else None
            if page is not None and _is_blank_popup(page):
                self._close(page)
            else:  # its page has not been announced yet: ``_on_page`` closes it
                self._refused_popups += 1

    def _close(self, page: Page) -> None:
        page.close()
        self.on_close()

    def _load_checking_redirects(self, route: Route, frame: Frame | None) -> None:
        url = route.request.url
        try:
            first = route.fetch(max_redirects=0)
        except PlaywrightError as exc:
            log.debug("document fetch failed", url=url[:200], error=str(exc)[:200])
            route.abort("failed")
            return
        chain = redirect_chain(self.policy or self._start(url), url, first.status,
                               first.headers)
        try:
            hop_url, keeps_method = next(chain)
            while True:
                if keeps_method:
                    response = route.fetch(url=hop_url, max_redirects=0)
                else:  # after a 301/302/303 the browser would GET without a body
                    assert self._context is not None
                    response = self._context.request.fetch(hop_url, method="GET",
                                                           max_redirects=0)
                response.dispose()
                hop_url, keeps_method = chain.send((response.status, response.headers))
        except StopIteration as stop:
            end: ChainEnd = stop.value
        if end.hops == 0 and end.refusal is None:
            route.fulfill(response=first)
            return
        first.dispose()
        if end.refusal is not None:
            self._refuse(route, frame, end.url, end.refusal, "redirect", from_url=end.previous)
        elif end.exhausted:
            route.abort("failed")
        else:
            route.fulfill(status=307 if end.keeps_method else 303,
                          headers={"location": end.url})

    # ------------------------------------------------------------ the page side

    def _on_page(self, page: Page) -> None:
        page.on("framenavigated", self._on_frame_navigated)
        page.on("download", self._on_download)
        page.on("console", self._on_console)
        if self._refused_popups and _is_blank_popup(page):
            self._refused_popups -= 1
            self._close(page)

    def _on_console(self, message: ConsoleMessage) -> None:
        url = refused_by_chromium(message.type, message.text)
        if url is None:
            return
        policy = self.policy
        reason = (policy.refusal(url) if policy is not None else None) or (
            "Chromium does not let web pages open it")
        self._record(BlockedNavigation(url=url, reason=reason, initiator="page",
                                       from_url=message.page.url if message.page else ""))

    def _on_frame_navigated(self, frame: Frame) -> None:
        url = frame.url
        if not url or url.startswith(BROWSER_PAGES):
            return
        if self.policy is None:
            if frame.parent_frame is None:
                self._start(url)  # a file: start page is never a routed request
            return
        reason = self.policy.refusal(url)
        if reason is None:
            return
        page = frame.page
        try:
            if frame.parent_frame is not None:
                self._record(BlockedNavigation(url=url, reason=reason, initiator="frame",
                                               from_url=frame.parent_frame.url))
                frame.frame_element().evaluate(
                    "(e) => { e.removeAttribute('srcdoc'); e.src = 'about:blank'; }")
            elif page.opener() is not None and len(page.context.pages) > 1:
                self._record(BlockedNavigation(url=url, reason=reason, initiator="popup"))
                self._close(page)
            else:
                self._record(BlockedNavigation(url=url, reason=reason, initiator="page"))
                if page.go_back() is None and page.url == url:
                    page.goto("about:blank")
        except PlaywrightError as exc:
            log.debug("could not undo a blocked navigation", url=url[:200],
                      error=str(exc)[:200])

    def _on_download(self, download: Download) -> None:
        url = download.url
        policy = self.policy
        reason = policy.refusal(url) if policy is not None and url.startswith(
            ("http:", "https:")) else None
        record = DownloadRecord(url=url, filename=download.suggested_filename,
                                refused=reason or DOWNLOADS_OFF)
        log.info("download refused", url=url[:200], reason=record.refused)
        with self._lock:
            self._events.downloads.append(record)


def _frame_of(request: Any) -> Frame | None:
    try:
        frame: Frame = request.frame
    except PlaywrightError:  # a popup's first request comes before its frame exists
        return None
    return frame


def _initiator(frame: Frame | None) -> NavigationInitiator:
    if frame is None:
        return "popup"
    if frame.parent_frame is not None:
        return "frame"
    if frame.url in ("", "about:blank") and frame.page.opener() is not None:
        return "popup"
    return "page"


def _is_blank_popup(page: Page) -> bool:
    try:
        return page.url in ("", "about:blank") and page.opener() is not None
    except PlaywrightError:
        return False
