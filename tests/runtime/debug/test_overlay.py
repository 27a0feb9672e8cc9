"""The target box on real (headless) Chromium: drawn where the element is, in its
colour, gone when removed, and invisible to the observation even while it is drawn;
``--highlight`` shows it while it waits and removes it before the action."""

from __future__ import annotations

import asyncio
import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from PIL import Image

from linewise.agent.action_parser import parse_action
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.browser.extraction import observe
from linewise.runtime.debug.highlight import highlight_hooks
from linewise.runtime.debug.overlay import OVERLAY_COLOR, hide_target, show_target
from linewise.runtime.envs.base import PageAccess
from linewise.runtime.envs.factory import environment_for
from linewise.runtime.episode import StepContext
from linewise.runtime.log import configure_logging
from linewise.runtime.playwright_trace import NOTE, PlaywrightTraceHooks
from linewise.runtime.tasks.loader import adhoc_task
from linewise.settings import BrowserSettings, LinewiseSettings
from linewise.testing import StaticServer
from tests.support.pages import bid_of


def overlay_pixels(png: bytes) -> int:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(n for n, color in image.getcolors(1 << 24) or [] if color == OVERLAY_COLOR)


@pytest.mark.slow
async def test_the_box_is_drawn_around_the_target_and_never_observed(
    browser: Browser, pages: StaticServer
) -> None:
    env = environment_for(adhoc_task(pages.url("form.html"), "Sign up", 5), browser)
    await env.reset()
    try:
        first = await env.observe(screenshot=True)
        assert first.screenshot_png is not None and overlay_pixels(first.screenshot_png) == 0
        submit = bid_of(first.lines, r"button 'Submit'")
        box = await show_target(env, parse_action(f"click('{submit}')"))
        assert box is not None and box.width > 0
        session = env.session  # type: ignore[attr-defined]
        drawn = await session.page.screenshot()
        assert overlay_pixels(drawn) > 2 * (box.width + box.height)
        # Left drawn on purpose: the tree still cannot see it (aria-hidden, closed shadow
        # root), and the page's own scripts cannot find its label.
        seen = await observe(session, screenshot=False)
        assert seen.lines == first.lines
        found = await session.page.evaluate("document.body.innerText.includes('click(')")
        assert found is False
        await hide_target(env)
        assert overlay_pixels(await session.page.screenshot()) == 0
        # An action that names no element draws nothing.
        assert await show_target(env, parse_action("scroll(0, 100)")) is None
    finally:
        await env.close()


async def test_highlight_shows_the_box_while_it_waits_and_removes_it(
    browser: Browser, pages: StaticServer
) -> None:
    assert highlight_hooks(LinewiseSettings()) == []  # off by default
    headless = LinewiseSettings(browser=BrowserSettings(highlight_ms=300))
    configure_logging(json_lines=False, level="INFO")
    try:
        with structlog.testing.capture_logs() as logs:
            assert highlight_hooks(headless) == []  # nobody would see it: said, not silent
    finally:
        configure_logging(json_lines=False, level="WARNING")
    [ignored] = [entry for entry in logs if entry["event"] == "highlight_ignored"]
    assert ignored["log_level"] == "warning" and "--headed" in ignored["reason"]
    [hook] = highlight_hooks(LinewiseSettings(
        browser=BrowserSettings(highlight_ms=60_000, headless=False)))
    env = environment_for(adhoc_task(pages.url("form.html"), "Sign up", 5), browser)
    await env.reset()
    try:
        obs = await env.observe(screenshot=False)
        step = StepContext(task_id="t", index=0, goal="g", observation=obs, env=env,
                           action=parse_action(f"click('{bid_of(obs.lines, r'button .Submit.')}')"))
        waiting = asyncio.ensure_future(hook.before_act(step))
        page = env.session.page  # type: ignore[attr-defined]
        while not overlay_pixels(await page.screenshot()):
            assert not waiting.done()
        waiting.cancel()  # the action would run now: the box must be gone first
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        assert overlay_pixels(await page.screenshot()) == 0
    finally:
        await env.close()


class _PageOfAnotherKind:
    """An environment of a kind the features have never heard of, which states that it
    has a page (``PageAccess``) by handing linewise's Chromium page on."""

    def __init__(self, chromium: Any) -> None:
        self.measure = chromium.measure
        self.evaluate = chromium.evaluate
        self.start_trace_chunk = chromium.start_trace_chunk
        self.stop_trace_chunk = chromium.stop_trace_chunk


async def test_the_box_and_the_trace_ask_the_environment_for_its_page_not_its_class(
    browser: Browser, pages: StaticServer, tmp_path: Path
) -> None:
    chromium = environment_for(adhoc_task(pages.url("form.html"), "Sign up", 5), browser)
    await chromium.reset()
    try:
        obs = await chromium.observe(screenshot=False)
        click = parse_action(f"click('{bid_of(obs.lines, r'button .Submit.')}')")
        other = _PageOfAnotherKind(chromium)
        assert isinstance(other, PageAccess) and not isinstance(object(), PageAccess)
        box = await show_target(other, click)
        assert box is not None and box.width > 0
        page = chromium.session.page  # type: ignore[attr-defined]
        assert overlay_pixels(await page.screenshot()) > 0
        await hide_target(other)
        assert overlay_pixels(await page.screenshot()) == 0
        assert await show_target(object(), click) is None  # no page: nothing drawn
        hooks = PlaywrightTraceHooks()
        for env in (other, object()):
            step = StepContext(task_id="t", index=0, goal="g", observation=obs, action=click,
                               env=env, directory=tmp_path)  # type: ignore[arg-type]
            await hooks.before_act(step)
            await hooks.after_act(step)
            recorded = step.notes[NOTE]
            if env is other:
                assert recorded == "playwright-trace/step-000.zip"
                assert (tmp_path / recorded).stat().st_size > 0
            else:
                assert recorded.startswith("not recorded")
    finally:
        await chromium.close()
