"""BrowserGym's registered tasks as an environment of the one step loop.

The task's own set-up, validation and reward are BrowserGym's (``env.reset``,
``env.step``); the observation is built from the AXTree and element properties BrowserGym
extracted, flattened by the same ``flatten_axtree`` as linewise's own environment, so a
page reads the same to the model whichever environment produced it.

The navigation policy applies as in linewise's own browser: ``SyncNavigationGuard``
(``runtime/browser/sync_guard.py``) is attached to BrowserGym's context when the task's
set-up starts, and the model's ``goto`` is checked before BrowserGym runs it.

BrowserGym's env is sync Playwright, which is bound to the thread that started it: every
call into it runs on one worker thread owned by this environment (``runtime/envs/
browsergym_gym.py`` gives each thread its own Playwright), while the loop, the model and
the filter stay on the asyncio loop.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import structlog
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import ActionSet, refused_goto_message
from linewise.errors import BrowserError, BrowserStalled
from linewise.records import NavigationEvents, Tab, TargetBox
from linewise.runtime.browser.chromium import GYM_BID_ATTRIBUTE, BrowserConfig
from linewise.runtime.browser.display import require_display
from linewise.runtime.browser.executor import ActionOutcome
from linewise.runtime.browser.extraction import crop_png
from linewise.runtime.browser.navigation import NavigationPolicy
from linewise.runtime.browser.observation import (
    ElementProperties,
    Observation,
    apply_invisible_text,
    flatten_axtree,
)
from linewise.runtime.browser.proxy import ProxyLimits
from linewise.runtime.browser.scripts import own_js
from linewise.runtime.browser.sync_guard import SyncNavigationGuard
from linewise.runtime.envs.browsergym_gym import make_env, stop_thread_playwright
from linewise.runtime.envs.chromium import blocked_note
from linewise.runtime.tasks.browser_task import TaskStart, TaskStatus
from linewise.runtime.tasks.schema import BrowserGymTask

log = structlog.get_logger(__name__)

T = TypeVar("T")

CLOSE_TIMEOUT_S = 30.0
"""How long closing may wait for the worker thread (a hung page can block it)."""

START_MARGIN_S = 60.0
"""Beyond the navigation deadline, for ``reset``: it launches BrowserGym's own Chromium."""

TRACE_CHUNK_TIMEOUT_S = 60.0
"""For a Playwright trace chunk on the worker thread: saving one holds the page's DOM
snapshots, which takes seconds on a large page."""

INVISIBLE_COUNTS = "linewise_invisible_text"
"""Where an observation dict keeps how many nodes the invisible-text check affected."""

CONTENT_BOX = "linewise_content_box"
"""Where an observation dict keeps the box of what the page shows (``content_box.js``),
for a task whose screenshots are cut to it."""

STEP_MARGIN_S = 10.0
"""Beyond the action, navigation and settle deadlines, for ``step``: it also observes."""

MEASURE_TIMEOUT_MS = 500
"""For the target's box before an action: an element that is not there is not waited for."""


class BrowserGymEnv:
    """One BrowserGym task, its gym env confined to a worker thread of its own."""

    agent_can_end = False

    def __init__(
        self, task: BrowserGymTask, browser: BrowserConfig, task_kwargs: dict[str, Any]
    ) -> None:
        self.task = task
        self.browser = browser
        self.task_kwargs = task_kwargs
        self.single_page = task.browsergym.startswith("miniwob.")
        self.actions = ActionSet.for_task(agent_can_end=self.agent_can_end,
                                          single_page=self.single_page)
        """What an episode of this task may ask ``act`` to run: the actions it offers,
        less ``run_skill`` (the episode runs a skill's steps itself). ``reset`` checks
        that BrowserGym runs each as linewise offers it (``check_actions``)."""
        # MiniWoB++ draws its task in a corner of the viewport, as on linewise's Chromium
        # (``MiniWoBBrowserTask.crop_screenshots``)
        self.crop_screenshots = self.single_page
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"bgym-{task.id}")
        self._gym: Any = None
        self._obs: dict[str, Any] = {}
        self._status = TaskStatus()
        navigation = browser.navigation
        self.guard = SyncNavigationGuard(lambda start_url: NavigationPolicy.for_task(
            navigation, start_url, allowed_domains=task.allowed_domains,
            blocked_domains=task.blocked_domains,
        ), navigation_timeout_ms=browser.navigation_timeout_ms,
            proxy_limits=ProxyLimits.from_settings(navigation)) if navigation.enforce else None

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    async def _bounded(self, stage: str, fn: Callable[[], T], timeout_s: float) -> T:
        """``fn`` on the worker thread within ``timeout_s``. A thread cannot be
        interrupted: past the deadline it is left to finish and the step ends stalled
        (``close`` then gives up on the thread after ``CLOSE_TIMEOUT_S``)."""
        try:
            return await asyncio.wait_for(self._in_thread(fn), timeout_s)
        except TimeoutError:
            raise BrowserStalled(stage, timeout_s, f"BrowserGym task {self.task.id}") from None

    async def reset(self) -> TaskStart:
        if not self.browser.headless:
            require_display()  # else BrowserGym's launch waits minutes for a window

        def start() -> dict[str, Any]:
            self._gym = make_env(
                self.task.env_id, task_kwargs=self.task_kwargs, headless=self.browser.headless,
                slow_mo_ms=self.browser.slow_mo_ms, timeout_ms=self.browser.action_timeout_ms,
                action_timeout_ms=self.browser.action_timeout_ms,
                context_options=self.guard.context_options() if self.guard is not None else None,
                actions=self.actions,
            )
            if self.guard is not None:
                _guard_setup(self._gym.unwrapped, self.guard)
            obs, _ = self._gym.reset(seed=self.task.seed)
            return self._with_page_extras(dict(obs))

        self._obs = await self._bounded(
            "task start", start, self.browser.navigation_timeout_ms / 1000 + START_MARGIN_S
        )
        return TaskStart(goal=self._obs.get("goal") or "", start_url=self._obs.get("url", ""))

    async def observe(self, *, screenshot: bool) -> Observation:
        return observation_from_gym(self._obs, screenshot=screenshot)

    async def act(self, action: ParsedAction) -> ActionOutcome:
        if self._gym is None:
            raise BrowserError("the environment is not reset")
        gym = self._gym
        refusal = self._refusal(action)
        if refusal is not None:
            return ActionOutcome(error=refusal)

        def step() -> tuple[dict[str, Any], float, bool, TargetBox | None]:
            box = target_box(gym.unwrapped.page, action.bids[0]) if action.bids else None
            obs, reward, terminated, truncated, _ = gym.step(str(action))
            return (self._with_page_extras(dict(obs)), float(reward),
                    bool(terminated or truncated), box)

        loop = asyncio.get_running_loop()
        started = loop.time()
        config = self.browser
        longest_ms = max(config.action_timeout_ms, config.navigation_timeout_ms)
        deadline_s = (longest_ms + config.settle_timeout_ms) / 1000 + STEP_MARGIN_S
        self._obs, reward, done, box = await self._bounded("act", step, deadline_s)
        self._status = TaskStatus(reward=reward, done=done)
        error = self._obs.get("last_action_error") or ""
        if self.guard is not None:
            told = "".join(blocked_note(block) for block in self.guard.take_notes()).strip()
            error = f"{error}\n{told}" if error and told else error or told
        return ActionOutcome(error=error or None, duration_ms=(loop.time() - started) * 1000,
                             target_box=box)

    async def on_page(self, stage: str, work: Callable[[Page], T], timeout_s: float) -> T:
        """``work`` on the task's active page, on the worker thread, within ``timeout_s``:
        for what draws or records in the page itself (the debugger's box, the Playwright
        trace). The episode's actions queue behind it, so keep it short."""
        gym = self._gym
        if gym is None:
            raise BrowserError("the environment is not reset")
        return await self._bounded(stage, lambda: work(gym.unwrapped.page), timeout_s)

    async def measure(self, bid: str, timeout_s: float) -> TargetBox | None:
        return await self.on_page("target box", lambda page: target_box(page, bid), timeout_s)

    async def evaluate(self, script: str, argument: dict[str, Any], timeout_s: float) -> None:
        await self.on_page("page script", lambda page: page.evaluate(script, argument),
                           timeout_s)

    async def start_trace_chunk(self, title: str, *, first: bool) -> None:
        def start(page: Page) -> None:
            tracing = page.context.tracing
            if first:
                tracing.start(screenshots=True, snapshots=True)
            tracing.start_chunk(title=title)

        await self.on_page("playwright trace", start, TRACE_CHUNK_TIMEOUT_S)

    async def stop_trace_chunk(self, path: Path) -> None:
        await self.on_page("playwright trace",
                           lambda page: page.context.tracing.stop_chunk(path=path),
                           TRACE_CHUNK_TIMEOUT_S)

    async def page_changed(self) -> None:
        """Read the page again, as ``step`` would have: BrowserGym observes only inside
        its own ``reset`` and ``step``, so what a person did would go unseen."""
        gym = self._gym
        if gym is None:
            raise BrowserError("the environment is not reset")

        def read() -> dict[str, Any]:
            browser_env = gym.unwrapped
            browser_env._wait_dom_loaded()
            browser_env._active_page_check()
            return self._with_page_extras(dict(browser_env._get_obs()))

        config = self.browser
        self._obs = await self._bounded(
            "observe", read, (config.observe_timeout_ms + config.settle_timeout_ms) / 1000
            + STEP_MARGIN_S,
        )

    def _with_page_extras(self, obs: dict[str, Any]) -> dict[str, Any]:
        """``obs`` with what linewise reads of the page beside BrowserGym: invisible
        text, and the box screenshots are cut to (on the worker thread, right after
        BrowserGym read the page and took its screenshot)."""
        obs = self._with_invisible_text(obs)
        if self.crop_screenshots and self._gym is not None and "screenshot" in obs:
            page = self._gym.unwrapped.page
            try:
                box = page.evaluate(own_js("content_box.js"))
            except PlaywrightError as exc:  # the screenshot stays whole
                log.debug("screenshot not cropped", error=str(exc)[:200])
                return obs
            if box:
                # BrowserGym shoots MiniWoB++ at a scale of its own (1.5), under device
                # metrics it then resets: the CSS pixels the image shows are its size
                # over that scale, not the viewport the page reports now.
                scale = float(getattr(page, "_bgym_scale_factor", 1.0) or 1.0)
                height, width = obs["screenshot"].shape[:2]
                obs[CONTENT_BOX] = {**box, "viewport_width": width / scale,
                                    "viewport_height": height / scale}
        return obs

    def _with_invisible_text(self, obs: dict[str, Any]) -> dict[str, Any]:
        """``obs`` with the text a person cannot see dropped or marked in its AXTree, as
        linewise's own extraction does (on the worker thread, right after BrowserGym read
        the page: its element ids are still on the elements)."""
        mode = self.browser.invisible_text
        if mode == "keep" or self._gym is None or "axtree_object" not in obs:
            return obs
        hidden: dict[str, str] = {}
        script = own_js("invisible_text.js")
        for frame in self._gym.unwrapped.page.frames:
            try:
                hidden.update(frame.evaluate(script, GYM_BID_ATTRIBUTE) or {})
            except PlaywrightError as exc:  # a detached or unscriptable frame keeps its text
                log.debug("invisible-text check skipped a frame", error=str(exc)[:200])
        obs[INVISIBLE_COUNTS] = apply_invisible_text(obs["axtree_object"], hidden, mode)
        return obs

    def _refusal(self, action: ParsedAction) -> str | None:
        """The model's own ``goto`` to a refused URL, answered before BrowserGym runs it."""
        url = action.arguments.get("url")
        if self.guard is None or action.name != "goto" or not isinstance(url, str):
            return None
        reason = self.guard.check_model_url(url, from_url=self._obs.get("url", ""))
        return refused_goto_message(url, reason) if reason is not None else None

    async def status(self) -> TaskStatus:
        return self._status

    async def judge(self, answer: str | None, reward: float) -> bool | None:
        return reward > 0

    def take_navigation_events(self) -> NavigationEvents:
        return self.guard.take_events() if self.guard is not None else NavigationEvents()

    async def close(self) -> None:
        gym = self._gym
        self._gym = None

        def stop() -> None:
            try:
                if gym is not None:
                    gym.close()
            except Exception as exc:  # closing must never mask the episode's outcome
                log.warning("browsergym env did not close", error=str(exc))
            finally:
                stop_thread_playwright()
                if self.guard is not None:
                    self.guard.close()

        try:
            await asyncio.wait_for(self._in_thread(stop), CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning("browsergym env still busy; its thread is left to finish",
                        task_id=self.task.id)
        finally:
            self._thread.shutdown(wait=False)


def _guard_setup(gym: Any, guard: SyncNavigationGuard) -> None:
    """Make every task the env creates attach ``guard`` to its page's context before its
    own set-up navigates (BrowserGym creates the context inside ``reset``), and keep
    BrowserGym's active page off the popups the guard closes: the guard's event handlers
    run whenever BrowserGym is inside a Playwright call, so a popup can close while
    BrowserGym reads it; it then reads the page it falls back to."""
    make_task = gym.task_entrypoint
    activate = gym._activate_page_from_js

    def guarded_task(*args: Any, **kwargs: Any) -> Any:
        task = make_task(*args, **kwargs)
        setup = task.setup

        def guarded_setup(page: Any) -> Any:
            guard.attach(page.context)
            return setup(page=page)

        task.setup = guarded_setup
        return task

    def activate_open_page(page: Any) -> None:
        if not page.is_closed():  # a refused popup's script can report after its close
            activate(page)

    gym.task_entrypoint = guarded_task
    gym._activate_page_from_js = activate_open_page
    guard.on_close = gym._active_page_check
    for name in ("_wait_dom_loaded", "_get_obs"):
        setattr(gym, name, _again_after_a_close(gym, getattr(gym, name)))


def _again_after_a_close(gym: Any, read: Callable[[], T]) -> Callable[[], T]:
    def read_open_page() -> T:
        try:
            return read()
        except PlaywrightError as exc:
            if not gym.page.is_closed() and "closed" not in str(exc):
                raise
            gym._active_page_check()
            return read()

    return read_open_page


def target_box(page: Page, bid: str) -> TargetBox | None:
    """Where the element ``bid`` is on the page (frames included), or None when it is
    not there or has no box; measured before the action, as linewise's own browser does."""
    from browsergym.core.action.utils import get_elem_by_bid  # with the gym env, lazily

    try:
        box = get_elem_by_bid(page, bid).bounding_box(timeout=MEASURE_TIMEOUT_MS)
    except (PlaywrightError, ValueError) as exc:
        log.debug("target not measured", bid=bid, error=str(exc)[:200])
        return None
    return TargetBox(**box) if box is not None else None


def observation_from_gym(obs: dict[str, Any], *, screenshot: bool) -> Observation:
    """An ``Observation`` from a BrowserGym observation dict, flattened as linewise does."""
    extra = obs.get("extra_element_properties") or {}
    elements = {
        bid: ElementProperties(props.get("visibility"), bool(props.get("clickable")))
        for bid, props in extra.items()
    }
    lines = flatten_axtree(obs["axtree_object"], elements)
    urls = list(obs.get("open_pages_urls") or [obs.get("url", "")])
    titles = list(obs.get("open_pages_titles") or [""] * len(urls))
    active = int(obs["active_page_index"][0]) if "active_page_index" in obs else 0
    png = _png(obs.get("screenshot")) if screenshot else None
    clip = None
    if png is not None and obs.get(CONTENT_BOX):
        png, clip = crop_png(png, obs[CONTENT_BOX])
    tabs = [
        Tab(index=i, url=url, title=title, active=i == active)
        for i, (url, title) in enumerate(zip(urls, titles, strict=False))
    ]
    return Observation(
        url=obs.get("url", ""),
        title=tabs[active].title if 0 <= active < len(tabs) else "",
        tabs=tabs,
        lines=lines,
        focused_bid=obs.get("focused_element_bid") or "",
        elements=elements,
        screenshot_png=png,
        screenshot_clip=clip,
        invisible=dict(obs.get(INVISIBLE_COUNTS) or {}),
    )


def _png(pixels: Any) -> bytes | None:
    if pixels is None:
        return None
    from PIL import Image  # BrowserGym's own dependency; only needed with screenshots

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()
