"""The navigation policy on BrowserGym's own browser (sync Playwright, one worker thread).

BrowserGym's gym env creates its browser context and runs the task's set-up inside one
``reset`` call, so ``BrowserGymEnv`` wraps the task and calls ``attach`` on the set-up's
page before the set-up navigates. The decisions are ``guard_rules.py``'s, the same the
async guard (``guard.py``) makes, carried out with sync Playwright: the policy proxy for
every connection (``context_options``), a route on every request of the context, a
watcher of committed navigations, Chromium's own refusals read from the console,
downloads refused and recorded. What differs:

* the policy is built from the first document the set-up loads: BrowserGym's tasks know
  their start URL only inside ``setup``, and the set-up itself is the task's, trusted;
* sync Playwright delivers events only while its thread is inside a Playwright call, so
  a page's navigation between two steps is routed when the next step starts;
* downloads are never saved (the context does not accept them).

The worker thread records; the asyncio side collects with ``take_events`` and
``take_notes`` (``GuardRecords`` locks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from playwright.sync_api import BrowserContext, ConsoleMessage, Download, Frame, Page, Route
from playwright.sync_api import Error as PlaywrightError

from linewise.records import BlockedNavigation, DownloadRecord, NavigationInitiator
from linewise.runtime.browser import guard_rules as rules
from linewise.runtime.browser.navigation import ChainEnd, NavigationPolicy, redirect_chain
from linewise.runtime.browser.proxy import ProxyHub, ProxyLimits, ProxyServer
from linewise.runtime.browser.resolver import Destination

log = structlog.get_logger(__name__)

CONTEXT_OPTIONS: dict[str, Any] = {"service_workers": "block", "accept_downloads": False}
"""BrowserGym's ``pw_context_kwargs``: a service worker would answer requests the route
never sees, and downloads are refused (``context_options`` adds the proxy)."""


class SyncNavigationGuard(rules.GuardRecords):
    """The policy of one BrowserGym episode, enforced on its (sync) browser context.

    ``policy_for`` builds the policy from the start URL once the set-up loads it;
    ``on_close`` runs after the guard closed the empty tab of a refused popup.
    """

    def __init__(self, policy_for: Callable[[str], NavigationPolicy],
                 on_close: Callable[[], None] = lambda: None,
                 navigation_timeout_ms: float = 30000.0,
                 proxy_limits: ProxyLimits | None = None) -> None:
        super().__init__()
        self._policy_for = policy_for
        self._proxy_limits = proxy_limits
        self.on_close = on_close
        self.navigation_timeout_ms = navigation_timeout_ms
        self.policy: NavigationPolicy | None = None
        self._refused_popups = 0
        self._context: BrowserContext | None = None
        self._proxy: ProxyServer | None = None

    def context_options(self) -> dict[str, Any]:
        """BrowserGym's ``pw_context_kwargs``, with a new policy proxy (``close`` stops
        it). Until the set-up's first document sets the policy, it lets all through."""
        if self._proxy is None:
            self._proxy = ProxyHub.shared().serve(self._connection_refusal,
                                                  limits=self._proxy_limits)
        return {**CONTEXT_OPTIONS, "proxy": {"server": self._proxy.url}}

    def _connection_refusal(self, to: Destination) -> str | None:
        return self.connection_refusal(to) if self.policy is not None else None

    def close(self) -> None:
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None

    def attach(self, context: BrowserContext) -> None:
        """Watch ``context`` (on the worker thread, before the set-up navigates)."""
        self._context = context
        context.route("**/*", self._route)
        context.on("page", self._on_page)
        # On the context: a popup's console message can come before its page is announced.
        context.on("console", self._on_console)
        for page in context.pages:
            self._on_page(page)

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
            navigation = request.is_navigation_request()
            if self.policy is None:
                if navigation and frame is not None and frame.parent_frame is None:
                    self._start(request.url)
                route.continue_()
                return
            initiator = _initiator(frame) if navigation else "page"
            plan = rules.plan_route(self.policy, request.url, navigation=navigation,
                              initiator=initiator)
            if plan.action == "continue":
                route.continue_()
            elif plan.action == "blocked":
                assert plan.reason is not None
                self.record_refused_connection(rules.request_host(request.url), plan.reason)
                route.abort("blockedbyclient")
            elif plan.action == "refused":
                assert plan.reason is not None
                self._refuse(route, frame, request.url, plan.reason, initiator)
            else:
                self._load_checking_redirects(route, frame)
        except PlaywrightError as exc:  # the page or context closed meanwhile
            log.debug("route handler gave up", url=request.url[:200], error=str(exc)[:200])

    def _refuse(self, route: Route, frame: Frame | None, url: str, reason: str,
                initiator: NavigationInitiator, from_url: str | None = None) -> None:
        if from_url is None:
            from_url = frame.url if frame is not None else ""
        self.record(BlockedNavigation(url=url, reason=reason, initiator=initiator,
                                      from_url=from_url))
        route.abort("aborted")
        if initiator == "popup":
            self._close_blank_popup(frame.page if frame is not None else None)

    def _close_blank_popup(self, page: Page | None) -> None:
        if page is not None and _is_blank_popup(page):
            self._close(page)
        else:  # its page has not been announced yet: ``_on_page`` closes it
            self._refused_popups += 1

    def _close(self, page: Page) -> None:
        page.close()
        self.on_close()

    def _load_checking_redirects(self, route: Route, frame: Frame | None) -> None:
        url = route.request.url
        timeout = self.navigation_timeout_ms
        try:
            first = route.fetch(max_redirects=0, timeout=timeout)
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
                    response = route.fetch(url=hop_url, max_redirects=0, timeout=timeout)
                else:  # after a 301/302/303 the browser would GET without a body
                    assert self._context is not None
                    response = self._context.request.fetch(hop_url, method="GET",
                                                           max_redirects=0, timeout=timeout)
                response.dispose()
                hop_url, keeps_method = chain.send((response.status, response.headers))
        except StopIteration as stop:
            end: ChainEnd = stop.value
        outcome = rules.chain_outcome(end)
        if outcome.action == "first":
            route.fulfill(response=first)
            return
        first.dispose()
        if outcome.action == "refused":
            assert end.refusal is not None
            self._refuse(route, frame, end.url, end.refusal, "redirect", from_url=end.previous)
        elif outcome.action == "failed":
            route.abort("failed")
        else:
            route.fulfill(status=outcome.status, headers={"location": outcome.location})

    # ------------------------------------------------------------ the page side

    def _on_page(self, page: Page) -> None:
        page.on("framenavigated", self._on_frame_navigated)
        page.on("download", self._on_download)
        if self._refused_popups and _is_blank_popup(page):
            self._refused_popups -= 1
            self._close(page)

    def _on_console(self, message: ConsoleMessage) -> None:
        page = message.page
        if self.record_chromium_refusal(message.type, message.text, page.url if page else ""):
            for candidate in self._context.pages if self._context is not None else []:
                if _is_blank_popup(candidate):  # what a refused window.open('data:…') left
                    self._close(candidate)

    def _on_frame_navigated(self, frame: Frame) -> None:
        url = frame.url
        if self.policy is None:
            if frame.parent_frame is None and url and not url.startswith(rules.BROWSER_PAGES):
                self._start(url)  # a file: start page is never a routed request
            return
        reason = rules.committed_refusal(self.policy, url)
        if reason is None:
            return
        page = frame.page
        try:
            parent = frame.parent_frame
            action, initiator = rules.undo_action(
                is_iframe=parent is not None,
                is_popup=page.opener() is not None and len(page.context.pages) > 1)
            self.record(BlockedNavigation(url=url, reason=reason, initiator=initiator,
                                          from_url=parent.url if parent is not None else ""))
            if action == "empty_frame":
                frame.frame_element().evaluate(rules.EMPTY_FRAME_JS)
            elif action == "close_popup":
                self._close(page)
            else:
                self._take_back(page)
        except PlaywrightError as exc:
            log.debug("could not undo a blocked navigation", url=url[:200],
                      error=str(exc)[:200])

    def _take_back(self, page: Page) -> None:
        went_back = True
        try:
            page.go_back(wait_until="commit")
        except PlaywrightError as exc:
            went_back = False
            log.debug("could not go back from a blocked navigation", error=str(exc)[:200])
        if not page.is_closed() and rules.must_empty_after_going_back(
                self.policy, page.url, self._bounced_from, went_back=went_back):
            page.goto("about:blank", wait_until="commit")

    def _on_download(self, download: Download) -> None:
        url = download.url
        self.record_download(DownloadRecord(
            url=url, filename=download.suggested_filename,
            refused=rules.download_refusal(self.policy, url, can_save=False)))


def _frame_of(request: Any) -> Frame | None:
    try:
        frame: Frame = request.frame
    except PlaywrightError:  # a popup's first request comes before its frame exists
        return None
    return frame


def _initiator(frame: Frame | None) -> NavigationInitiator:
    if frame is None or frame.parent_frame is not None:
        return rules.initiator_of(has_frame=frame is not None, is_iframe=frame is not None,
                            blank_with_opener=False)
    return rules.initiator_of(has_frame=True, is_iframe=False,
                        blank_with_opener=_is_blank_popup(frame.page))


def _is_blank_popup(page: Page) -> bool:
    try:
        return page.url in rules.BLANK_PAGES and page.opener() is not None
    except PlaywrightError:
        return False
