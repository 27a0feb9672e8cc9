"""Chromium: finding it, launching it once per process, one fresh context per episode.

``Browser`` owns the Playwright driver and the Chromium process. ``BrowserSession`` is
one episode's isolated context: its open tabs, which one is active, and the CDP session
of the active tab that observation extraction reuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import socket
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog
from playwright.async_api import (
    Browser as PlaywrightBrowser,
)
from playwright.async_api import (
    BrowserContext,
    CDPSession,
    Dialog,
    ElementHandle,
    Frame,
    Page,
    Playwright,
    async_playwright,
)
from playwright.async_api import (
    Error as PlaywrightError,
)
from pydantic import Field

from linewise.agent.trace_zone import untraced
from linewise.errors import BrowserCrashed, BrowserError
from linewise.records import DialogRecord
from linewise.runtime.browser import call_stacks
from linewise.runtime.browser.binding import DocumentBinding
from linewise.runtime.browser.cdp import CDPConnection, CDPSender
from linewise.runtime.browser.display import require_display
from linewise.runtime.browser.driver import LAUNCH_SIGNALS, driver_environ
from linewise.runtime.browser.guard import NavigationGuard
from linewise.runtime.browser.observed import ObservedDocuments
from linewise.runtime.browser.proxy import ProxyLimits, ProxyServer
from linewise.runtime.browser.resolver import Resolver, resolver_rules
from linewise.runtime.secret_env import child_environment
from linewise.settings import BrowserSettings

log = structlog.get_logger(__name__)

def private_bid_attribute() -> str:
    """A fresh name for the DOM attribute the marking script writes element ids into.

    Never ``bid``: pages set ``bid`` themselves (auction and retail sites), which
    BrowserGym's marking refuses, and a page that knew the name could plant an element
    carrying an id the model is about to act on. The model still reads BrowserGym-style
    ids; only the attribute that holds them on the page is private."""
    return f"data-lw-{secrets.token_hex(6)}"


GYM_BID_ATTRIBUTE = private_bid_attribute()
"""The attribute name for BrowserGym's own env, whose marking reads a module constant:
one per process (``envs/browsergym_gym.py`` installs it)."""

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium-browser", "chromium", "google-chrome")

HEADLESS_SHELL_CANDIDATES = (
    "/usr/bin/chromium-headless-shell", "chromium-headless-shell", "chrome-headless-shell",
)
"""Chromium's headless shell: the same Blink and accessibility tree without the browser's
user interface. It starts in about half the time and CPU of the full browser in headless
mode (``benchmarks/browser_launch.py``), which every episode of a bench and every test
pays, so a headless run prefers it; Playwright's own headless launches do the same. It
cannot open a window, so a headed run never takes it."""

WEBRTC_POLICY = (
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
)
"""WebRTC sends no UDP and makes no connection but through the context's proxy.

A page's RTCPeerConnection opens its sockets outside Chromium's proxied network stack:
before, a page that named a STUN or TURN server, or a peer's candidate, on a private
address sent it UDP (the page's data in its usernames) under every policy. With this
policy Chromium gathers no host and no server-reflexive candidate and sends nothing over
UDP; TURN over TCP (or TLS) is its one way out, and that goes through the proxy, which
checks its address like any other connection. The policy is set from the command line,
above anything a page reaches, by a switch each kind of Chromium reads and the other
ignores: the full browser's sets its profile preference ``webrtc.ip_handling_policy``;
the headless shell has no profile preferences and reads the ``--force-`` switch (which
the full browser no longer has). Both are tested on 156, on both executables, in
``tests/runtime/browser/test_webrtc.py``."""

# Flags a sandboxed, offline machine needs: no background traffic to Google, no
# /dev/shm exhaustion in containers, no sandbox when running as root; and WebRTC through
# the proxy only.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-features=OverlayScrollbars,ExtendedOverlayScrollbars,Translate",
    *WEBRTC_POLICY,
)


class BrowserConfig(BrowserSettings):
    """How Chromium is launched and how long it may take to do things: the user's
    ``BrowserSettings`` (headless, chromium, slow_mo_ms, action_timeout_ms) plus the
    fixed rest."""

    viewport_width: int = 1280
    viewport_height: int = 720
    locale: str = "en-US"
    timezone_id: str = "UTC"
    extra_args: tuple[str, ...] = Field(
        default=(),
        description="More Chromium flags, e.g. --host-resolver-rules for test suites that "
        "stand a local server in for a named site.",
    )
    direct_cdp: bool = Field(
        default=True,
        description="Read AXTrees and DOM snapshots over a DevTools port on 127.0.0.1 "
        "(several times faster on large pages than through Playwright's driver).",
    )

    @classmethod
    def from_settings(cls, settings: BrowserSettings) -> BrowserConfig:
        return cls(**settings.model_dump())


def find_chromium(explicit: str | None = None, *, headless: bool = False) -> str | None:
    """Return the Chromium to launch, or None to let Playwright use its own build.

    Order: the explicit path, ``LINEWISE_CHROMIUM``, then (headless only) Chromium's
    headless shell, then /usr/bin/chromium, chromium-browser, chromium, google-chrome on
    PATH.
    """
    for candidate in (explicit, os.environ.get("LINEWISE_CHROMIUM")):
        if candidate:
            path = Path(candidate)
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise BrowserError(f"Chromium not found or not executable at {candidate!r}")
            return str(path)
    shell = first_executable(HEADLESS_SHELL_CANDIDATES) if headless else None
    return shell or first_executable(CHROMIUM_CANDIDATES)


def first_executable(candidates: Sequence[str]) -> str | None:
    """The first of ``candidates`` (absolute paths, or names looked up on PATH) that is an
    executable file."""
    for candidate in candidates:
        found = candidate if os.path.isabs(candidate) else shutil.which(candidate)
        if found and os.path.isfile(found) and os.access(found, os.X_OK):
            return found
    return None


class Browser:
    """One Playwright driver and one Chromium process, shared by every episode.

    Use as ``async with Browser(config) as browser:`` and open a ``BrowserSession``
    per episode with ``await browser.new_session()``.
    """

    def __init__(self, config: BrowserConfig | None = None) -> None:
        self.config = config or BrowserConfig()
        self._playwright: Playwright | None = None
        self._browser: PlaywrightBrowser | None = None
        self.executable_path: str | None = None
        self.devtools_port: int | None = None
        self.relaunches = 0
        """How many times Chromium was launched again after it died or disconnected."""
        self._sessions: weakref.WeakSet[BrowserSession] = weakref.WeakSet()
        self._launch_lock = asyncio.Lock()
        self._closing = False

    async def start(self) -> Browser:
        if not self.config.headless:
            require_display()  # else Playwright waits 3 minutes for a window that never opens
        self.executable_path = find_chromium(self.config.chromium,
                                             headless=self.config.headless)
        # The driver copies os.environ, and Chromium inherits the driver's: neither gets a
        # secret's variable (``secret_env.py``); and the driver leaves signals to
        # linewise (``driver.py``).
        with driver_environ():
            self._playwright = await async_playwright().start()
        call_stacks.install()  # Playwright's per-call stack, without reading source files
        await self._launch()
        return self

    async def _launch(self) -> None:
        assert self._playwright is not None
        args = [*CHROMIUM_ARGS, *self.config.extra_args]
        if self.config.direct_cdp:
            self.devtools_port = _free_port()
            args += [
                f"--remote-debugging-port={self.devtools_port}",
                "--remote-debugging-address=127.0.0.1",
            ]
        env: dict[str, str | float | bool] = {**child_environment()}
        try:
            self._browser = await self._playwright.chromium.launch(
                headless=self.config.headless,
                executable_path=self.executable_path,
                args=args,
                env=env,
                slow_mo=self.config.slow_mo_ms or None,
                # Ctrl+C in a terminal and `timeout`'s SIGTERM reach the whole process
                # group: linewise decides what they mean (pause, stop after the step) and
                # closes Chromium itself.
                **LAUNCH_SIGNALS,
            )
        except PlaywrightError as exc:
            await self._playwright.stop()
            self._playwright = None
            where = self.executable_path or "Playwright's bundled Chromium"
            raise BrowserError(
                f"Could not launch Chromium ({where}): {exc.message.splitlines()[0]}. "
                "Install it (apt-get install chromium) or set LINEWISE_CHROMIUM."
            ) from exc
        self._browser.on("disconnected", self._on_disconnected)
        log.info(
            "browser started",
            chromium=self.executable_path or "playwright",
            version=self._browser.version,
            headless=self.config.headless,
        )

    # Crash recovery: a Chromium that died or disconnected fails the sessions open on it
    # (their episodes end as infrastructure endings) and is launched again for the next
    # session; the Playwright driver itself is kept.

    @property
    def connected(self) -> bool:
        return self._browser is not None and self._browser.is_connected()

    def _on_disconnected(self, browser: PlaywrightBrowser) -> None:
        if self._closing or browser is not self._browser:
            return
        log.warning("browser disconnected; it will be relaunched",
                    open_sessions=len(self._sessions))
        crash = BrowserCrashed("browser", "Chromium crashed or disconnected during the episode")
        for session in list(self._sessions):
            session.fail(crash)

    async def _ensure_connected(self) -> None:
        async with self._launch_lock:
            if self._playwright is None:
                raise BrowserError("Browser is not started")
            if self.connected:
                return
            old, self._browser = self._browser, None
            if old is not None:
                try:
                    await asyncio.wait_for(old.close(), self.config.close_timeout_ms / 1000)
                except (PlaywrightError, TimeoutError):
                    pass
            await self._launch()
            self.relaunches += 1
            log.warning("browser relaunched", relaunches=self.relaunches)

    @property
    def version(self) -> str:
        return self._browser.version if self._browser else ""

    async def new_session(self, guard: NavigationGuard | None = None) -> BrowserSession:
        """A fresh, isolated browser context with one blank tab, watched by ``guard``, on
        a relaunched Chromium if the previous one died.

        Service workers are always blocked: a worker's fetches would skip the guard's
        route. With a guard, every connection goes through its policy proxy. Without a
        guard, downloads are refused.
        """
        await self._ensure_connected()
        if self._browser is None:
            raise BrowserError("Browser is not started")
        proxy = guard.open_proxy(Resolver(resolver_rules(self.config.extra_args)),
                                 ProxyLimits.from_settings(self.config.navigation)
                                 ) if guard else None
        try:
            context = await self._browser.new_context(
                viewport={"width": self.config.viewport_width,
                          "height": self.config.viewport_height},
                locale=self.config.locale,
                timezone_id=self.config.timezone_id,
                service_workers="block",
                accept_downloads=guard is not None and guard.accept_downloads,
                proxy={"server": proxy.url} if proxy is not None else None,
            )
        except BaseException:
            if proxy is not None:
                proxy.close()
            raise
        context.set_default_timeout(self.config.action_timeout_ms)
        context.set_default_navigation_timeout(self.config.navigation_timeout_ms)
        if guard is not None:
            await guard.attach(context)
        session = BrowserSession(context, self.config, self.devtools_port, proxy)
        self._sessions.add(session)
        await session.open_tab()
        return session

    async def close(self) -> None:
        self._closing = True
        if self._browser is not None:
            try:
                await self._browser.close()
            except PlaywrightError:
                pass
            self._browser = None
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    async def __aenter__(self) -> Browser:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


POPUP_WAIT_S = 3.0
"""How long, after an action, a tab it opened may take to reach Playwright and come to
the front (one that takes longer stays in the background)."""


@dataclass
class _Acting:
    """An action of the agent's under way: the tab it acts on, that tab's target id, and
    the page targets of the browser context before it began."""

    page: Page
    target_id: str
    before: frozenset[str]


class BrowserSession:
    """One episode's browser context: its tabs and which one the agent is on.

    Playwright has no notion of an active tab. The session keeps a most-recent-first
    history, and when the active tab closes the previous one takes over. A tab the
    agent's own action opened (its click on a ``target=_blank`` link or on a button that
    calls ``window.open``) becomes active; any other tab a page opens (a script's popup,
    a frame's, while the model thinks or during its action) is listed in the tabs and
    left in the background (``acting``).
    """

    def __init__(
        self, context: BrowserContext, config: BrowserConfig, devtools_port: int | None = None,
        proxy: ProxyServer | None = None,
    ) -> None:
        self.context = context
        self.proxy = proxy
        self.config = config
        self.devtools_port = devtools_port
        self.bid_attribute = private_bid_attribute()
        """Where this episode's marking keeps element ids (``private_bid_attribute``)."""
        self.binding = DocumentBinding()
        """The document last observed, where secrets are typed (``binding.py``)."""
        self.observed = ObservedDocuments()
        """The documents last observed, where actions find their elements (``observed.py``)."""
        self._history: list[Page] = []
        self._agent_tabs: weakref.WeakSet[Page] = weakref.WeakSet()
        self._target_ids: dict[Page, str] = {}
        self._cdp: dict[Page, CDPSender] = {}
        self.fault: BrowserCrashed | None = None
        """Set when Chromium or one of the context's renderers died: the episode is over."""
        self.faulted = asyncio.Event()
        self._dialogs: list[DialogRecord] = []
        self.documents_committed = 0
        """How many documents the tabs' main frames have committed: an observation read
        while it changed may mix two documents (``ChromiumEnv.observe``)."""
        context.on("page", self._on_new_page)
        # On the context, once, from the episode's own task: a page-level "dialog"
        # listener is subscribed from Playwright's long-lived connection task, which keeps
        # a callback per subscription for the rest of the run (memory grows per episode).
        context.on("dialog", self._on_dialog)

    def _on_new_page(self, page: Page) -> None:
        # In the background: only an action of the agent's brings a tab to the front
        # (``acting``, ``open_tab``, ``focus_tab``).
        self._history.insert(0, page)
        log.debug("a tab opened", url=page.url[:200])
        page.on("close", self._on_close)
        page.on("crash", self._on_crash)
        page.on("framenavigated", self._on_frame_navigated)

    def _on_frame_navigated(self, frame: Frame) -> None:
        if frame.parent_frame is None:
            self.documents_committed += 1

    def fail(self, fault: BrowserCrashed) -> None:
        """Mark the session dead: every guarded operation on it ends with ``fault``."""
        if self.fault is None:
            self.fault = fault
            self.faulted.set()

    def _on_crash(self, page: Page) -> None:
        log.warning("renderer crashed", url=page.url)
        self.fail(BrowserCrashed("renderer", f"the tab's renderer crashed at {page.url}"))

    def _on_dialog(self, dialog: Dialog) -> None:
        # A dialog blocks the page's scripts until it is answered: answer at once, and
        # keep a record. beforeunload is accepted so a navigation the agent asked for
        # happens; alert, confirm and prompt are dismissed.
        accept = dialog.type == "beforeunload"
        self._dialogs.append(DialogRecord(
            type=dialog.type, message=dialog.message[:500],
            handled="accepted" if accept else "dismissed",
            url=dialog.page.url if dialog.page else "",
        ))
        asyncio.get_running_loop().create_task(_answer(dialog, accept))

    def take_dialogs(self) -> list[DialogRecord]:
        """The dialogs opened since the last call."""
        taken, self._dialogs = self._dialogs, []
        return taken

    def _on_close(self, page: Page) -> None:
        self._target_ids.pop(page, None)
        sender = self._cdp.pop(page, None)
        if isinstance(sender, CDPConnection):
            asyncio.get_running_loop().create_task(sender.close())
        if page in self._history:
            self._history.remove(page)

    def activate(self, page: Page) -> None:
        if page in self._history:
            self._history.remove(page)
        self._history.append(page)

    def _to_background(self, page: Page) -> None:
        if page in self._history:
            self._history.remove(page)
        self._history.insert(0, page)

    @contextlib.asynccontextmanager
    async def acting(self) -> AsyncIterator[None]:
        """The time of one action of the agent's (and the page's reaction to it). When it
        ends, a tab the main document of the acted-on tab opened meanwhile comes to the
        front (Chromium's ``openerFrameId``: the agent's click there caused it), once
        Playwright has it. A tab a frame opened (an ad's, whose timer fired during the
        action), and every tab a page opens outside an action, stays in the background,
        listed in the tabs."""
        acting = await self._start_acting()
        yield
        if acting is not None:
            await self._bring_popups_forward(acting)

    async def _start_acting(self) -> _Acting | None:
        try:
            page = self.page
            own = await self._target_id(page)
            return _Acting(page, own, frozenset(await self._page_targets(page)))
        except (PlaywrightError, BrowserError) as exc:
            log.debug("tabs not watched during the action", error=str(exc)[:200])
            return None

    async def _page_targets(self, page: Page) -> dict[str, dict[str, Any]]:
        """Chromium's page targets (every tab, including ones Playwright has not
        reported yet), by id."""
        infos = (await (await self.cdp(page)).send("Target.getTargets"))["targetInfos"]
        return {t["targetId"]: t for t in infos if t.get("type") == "page"}

    async def _target_id(self, page: Page) -> str:
        """The CDP target id of ``page``, which is also its main frame's id."""
        known = self._target_ids.get(page)
        if known is None:
            session = await self.context.new_cdp_session(page)
            try:
                known = str((await session.send("Target.getTargetInfo"))["targetInfo"]
                            ["targetId"])
            finally:
                await session.detach()
            self._target_ids[page] = known
        return known

    async def _bring_popups_forward(self, acting: _Acting) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + POPUP_WAIT_S
        try:
            while not acting.page.is_closed():
                targets = await self._page_targets(acting.page)
                caused = {tid for tid, t in targets.items() if tid not in acting.before
                          and t.get("openerFrameId") == acting.target_id}
                if not caused:
                    return
                pages = {await self._target_id(p): p for p in self.pages}
                arrived = caused & pages.keys()
                if arrived == caused or loop.time() >= deadline:
                    break
                await asyncio.sleep(0.05)
            else:
                return
        except (PlaywrightError, BrowserError) as exc:
            log.info("could not tell which tabs the action opened", error=str(exc)[:200])
            return
        if arrived != caused:
            log.info("a tab the action opened did not arrive in time; it stays in the "
                     "background", tabs=len(caused - arrived))
        brought = [page for target_id, page in pages.items() if target_id in arrived]
        for page in self.pages:  # in the order they opened: the last one in front
            if page in brought and page not in self._agent_tabs:
                self.activate(page)

    async def observed_element(self, bid: str) -> ElementHandle:
        """The element marked ``bid`` in the document the model last observed, if that is
        still the active tab's (``observed.py``). Finding it is linewise's own work,
        left out of Playwright traces (``agent/trace_zone.py``)."""
        with untraced(self.context):
            return await self.observed.element(bid, self.page)

    @property
    def page(self) -> Page:
        """The active tab."""
        while self._history and self._history[-1].is_closed():
            self._history.pop()
        if not self._history:
            raise BrowserError("No open tab in this browser context")
        return self._history[-1]

    @property
    def pages(self) -> list[Page]:
        return [p for p in self.context.pages if not p.is_closed()]

    async def ensure_page(self) -> Page:
        """The active tab, opening a blank one if the agent closed them all."""
        if not self.pages:
            return await self.open_tab()
        return self.page

    async def open_tab(self) -> Page:
        """A new blank tab, in front."""
        page = await self.context.new_page()
        self._agent_tabs.add(page)
        self.activate(page)
        return page

    async def focus_tab(self, index: int) -> Page:
        pages = self.pages
        if not 0 <= index < len(pages):
            raise IndexError(f"tab index {index} out of range: {len(pages)} tab(s) open")
        page = pages[index]
        await page.bring_to_front()
        self.activate(page)
        return page

    async def cdp(self, page: Page | None = None) -> CDPSender:
        """A CDP channel to the page (default: the active tab), reused across steps.

        The direct DevTools websocket when the browser has a DevTools port, else (or if
        it cannot be opened) a Playwright CDP session.
        """
        page = page or self.page
        sender = self._cdp.get(page)
        if isinstance(sender, CDPConnection) and sender.closed:
            sender = None
        if sender is None:
            session: CDPSession = await self.context.new_cdp_session(page)
            sender = session
            if self.devtools_port is not None:
                info = await session.send("Target.getTargetInfo")
                try:
                    sender = await CDPConnection.connect(
                        self.devtools_port, info["targetInfo"]["targetId"]
                    )
                    await session.detach()
                except BrowserError as exc:
                    log.warning("direct CDP unavailable; using Playwright's", error=str(exc))
            self._cdp[page] = sender
        return sender

    async def close(self) -> None:
        for sender in self._cdp.values():
            if isinstance(sender, CDPConnection):
                await sender.close()
        self._cdp.clear()
        try:
            await self.context.close()
        except PlaywrightError:
            pass
        if self.proxy is not None:
            self.proxy.close()


async def _answer(dialog: Dialog, accept: bool) -> None:
    try:
        await (dialog.accept() if accept else dialog.dismiss())
    except PlaywrightError:
        pass  # the page or its context closed first


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
