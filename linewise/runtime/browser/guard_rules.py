"""What a navigation guard does, decided once for both of its shells.

``NavigationGuard`` (async Playwright, ``guard.py``) and ``SyncNavigationGuard``
(BrowserGym's sync Playwright thread, ``sync_guard.py``) see the same events; every
decision about them is a function here, of the policy and plain facts the shell reads
off Playwright objects. The shells only read those facts and carry the decisions out.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import structlog

from linewise.records import (
    BlockedNavigation,
    DownloadRecord,
    NavigationEvents,
    NavigationInitiator,
    RefusedConnection,
)
from linewise.runtime.browser.navigation import ChainEnd, NavigationPolicy, RequestKind
from linewise.runtime.browser.resolver import Destination

log = structlog.get_logger(__name__)

DOWNLOADS_OFF = "downloads are off (the --downloads flag saves them in the episode folder)"
BLANK_PAGES = ("", "about:blank")
# The browser's own error page after a failed or aborted load: not a page's navigation.
BROWSER_PAGES = ("chrome-error://", "about:blank", "about:srcdoc")
REFUSED_LISTED = 20
"""How many hosts and reasons of refused requests one step lists; past that they are
only counted (a page can make thousands)."""
_CHROMIUM_REFUSALS = ("Not allowed to load local resource:",
                      "Not allowed to navigate top frame to data URL:")


@dataclass(frozen=True)
class RoutePlan:
    """What a route handler does with a request: let it through, block a sub-resource
    (``blocked``), refuse a navigation (``refused``, recorded), or fetch a document
    itself checking its redirect chain (``load``)."""

    action: Literal["continue", "blocked", "refused", "load"]
    reason: str | None = None


def plan_route(policy: NavigationPolicy, url: str, *, navigation: bool,
               initiator: NavigationInitiator) -> RoutePlan:
    if not navigation:
        reason = policy.decide("subresource", url)
        return RoutePlan("continue") if reason is None else RoutePlan("blocked", reason)
    kind: RequestKind = (
        "popup" if initiator == "popup" else "frame" if initiator == "frame" else "document")
    reason = policy.decide(kind, url)
    if reason is not None:
        return RoutePlan("refused", reason)
    if not url.startswith(("http:", "https:")):
        return RoutePlan("continue")  # a file: page inside the task's folder
    return RoutePlan("load")


def initiator_of(*, has_frame: bool, is_iframe: bool, blank_with_opener: bool
                 ) -> NavigationInitiator:
    """A routed navigation's initiator: a popup's first request comes before its frame
    exists, and while the frame is still blank."""
    if not has_frame:
        return "popup"
    if is_iframe:
        return "frame"
    return "popup" if blank_with_opener else "page"


@dataclass(frozen=True)
class ChainOutcome:
    """How a checked document load ends: hand the browser the first response
    (``first``), refuse the hop ``end.url``, fail, or redirect it straight to the
    chain's end (the browser fetches that once more itself, through the proxy)."""

    action: Literal["first", "refused", "failed", "redirect"]
    status: int = 0
    location: str = ""


def chain_outcome(end: ChainEnd) -> ChainOutcome:
    if end.hops == 0 and end.refusal is None:
        return ChainOutcome("first")
    if end.refusal is not None:
        return ChainOutcome("refused")
    if end.exhausted:
        return ChainOutcome("failed")
    return ChainOutcome("redirect", 307 if end.keeps_method else 303, end.url)


UndoAction = Literal["empty_frame", "close_popup", "go_back"]


def undo_action(*, is_iframe: bool, is_popup: bool) -> tuple[UndoAction, NavigationInitiator]:
    """How to undo a refused document that committed without a request (``blob:``,
    ``data:``): empty the iframe, close the popup, or take the page back."""
    if is_iframe:
        return "empty_frame", "frame"
    if is_popup:
        return "close_popup", "popup"
    return "go_back", "page"


EMPTY_FRAME_JS = "(e) => { e.removeAttribute('srcdoc'); e.src = 'about:blank'; }"


def must_empty_after_going_back(policy: NavigationPolicy | None, landed_url: str,
                                bounced_from: set[str], *, went_back: bool = True) -> bool:
    """Whether a tab that went back from a refused document must be emptied: going back
    failed (the entry before it may be another refused document, which Chromium shows as
    its error page), or the tab is still (or again) on a refused document, or on a page
    that already sent it to one. Records ``landed_url`` in ``bounced_from``."""
    if not went_back:
        return True
    if committed_refusal(policy, landed_url) is not None or landed_url in bounced_from:
        return True
    if landed_url and not landed_url.startswith(BROWSER_PAGES):
        bounced_from.add(landed_url)
    return False


def committed_refusal(policy: NavigationPolicy | None, url: str) -> str | None:
    """Why a committed frame URL must be undone, or None."""
    if policy is None or not url or url.startswith(BROWSER_PAGES):
        return None
    return policy.refusal(url)


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


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def request_host(url: str) -> str:
    """What a refused sub-resource is listed under: ``host:port`` as written (the port
    the scheme implies if none is), or the scheme for a URL without a host."""
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return f"{parts.scheme}:"
    try:
        port = parts.port or {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(parts.scheme)
    except ValueError:
        port = None
    return host_port(host.strip("[]"), port) if port else host


def download_refusal(policy: NavigationPolicy | None, url: str, *, can_save: bool
                     ) -> str | None:
    reason = policy.refusal(url) if policy is not None and url.startswith(
        ("http:", "https:")) else None
    if reason is None and not can_save:
        reason = DOWNLOADS_OFF
    return reason


class GuardRecords:
    """The blocks and downloads a guard saw, kept for the environment to collect
    (``take_events``) and to tell the model (``take_notes``); safe across threads."""

    policy: NavigationPolicy | None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events = NavigationEvents()
        self._unreported: list[BlockedNavigation] = []
        self._refused: dict[tuple[str, str], int] = {}
        self._refused_more = 0
        self._bounced_from: set[str] = set()
        """Pages that sent a tab to a refused document (``must_empty_after_going_back``)."""

    def check_model_url(self, url: str, from_url: str = "") -> str | None:
        """The refusal of a URL the model asked for (recorded), or None if allowed."""
        reason = self.policy.refusal(url) if self.policy is not None else None
        if reason is not None:
            self.record(BlockedNavigation(url=url, reason=reason, initiator="model",
                                          from_url=from_url), tell_model=False)
        return reason

    def take_events(self) -> NavigationEvents:
        """Blocks, downloads and refused requests since the last call."""
        with self._lock:
            events, self._events = self._events, NavigationEvents()
            refused, self._refused = self._refused, {}
            more, self._refused_more = self._refused_more, 0
        return events.model_copy(update={
            "refused_connections": [RefusedConnection(host=host, reason=reason, count=count)
                                    for (host, reason), count in refused.items()],
            "refused_connections_more": more})

    def record_refused_connection(self, host: str, reason: str) -> None:
        """A request that is not a page load refused by the policy (the proxy's refusals,
        on its own thread, and sub-resources the route refused): counted by host and
        reason, the first ``REFUSED_LISTED`` of them listed."""
        log.debug("request refused by the policy", host=host[:200], reason=reason)
        with self._lock:
            key = (host, reason)
            if key in self._refused:
                self._refused[key] += 1
            elif len(self._refused) < REFUSED_LISTED:
                self._refused[key] = 1
            else:
                self._refused_more += 1

    def take_notes(self) -> list[BlockedNavigation]:
        """Blocks the model has not been told about (its own refusals are action errors)."""
        with self._lock:
            notes, self._unreported = self._unreported, []
        return notes

    def record(self, block: BlockedNavigation, *, tell_model: bool = True) -> None:
        log.info("navigation blocked", url=block.url[:200], reason=block.reason,
                 initiator=block.initiator)
        with self._lock:
            self._events.blocked.append(block)
            if tell_model:
                self._unreported.append(block)

    def connection_refusal(self, to: Destination) -> str | None:
        """The policy's refusal of a connection the proxy is asked for (recorded), or
        None to make it."""
        assert self.policy is not None
        reason = self.policy.connection_refusal(to.host, to.port, to.addresses,
                                                by_name=to.by_name)
        if reason is not None:
            self.record_refused_connection(host_port(to.host, to.port), reason)
        return reason

    def record_download(self, download: DownloadRecord) -> None:
        log.info("download", url=download.url[:200], saved_as=download.saved_as,
                 refused=download.refused)
        with self._lock:
            self._events.downloads.append(download)

    def record_chromium_refusal(self, kind: str, text: str, page_url: str) -> bool:
        """Record a navigation Chromium refused on its own (from a console message);
        True when it was one (a refused ``window.open`` then leaves a blank tab)."""
        url = refused_by_chromium(kind, text)
        if url is None:
            return False
        reason = (self.policy.refusal(url) if self.policy is not None else None) or (
            "Chromium does not let web pages open it")
        self.record(BlockedNavigation(url=url, reason=reason, initiator="page",
                                      from_url=page_url))
        return True
