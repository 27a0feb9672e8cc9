"""Playwright's per-call stack, taken by walking frames (``browser/call_stacks.py``):
the same frames as ``inspect.stack()``, and Playwright still names its calls."""

from __future__ import annotations

import inspect

import playwright._impl._connection as connection
import pytest
from playwright.async_api import Error as PlaywrightError

from linewise.runtime.browser import call_stacks
from linewise.runtime.browser.chromium import BrowserSession


def _where(stack: list[inspect.FrameInfo]) -> list[tuple[object, str, int, str]]:
    return [(info.frame, info.filename, info.lineno, info.function) for info in stack]


def test_the_walk_finds_the_frames_inspect_finds() -> None:
    walked, inspected = call_stacks.frames(), inspect.stack()  # one line: the same lineno
    assert len(walked) > 3
    assert _where(walked) == _where(inspected)
    assert all(info.code_context is None for info in walked)


async def test_playwright_names_its_calls_with_the_walk(session: BrowserSession) -> None:
    # the session's browser started Playwright, which installed the walk
    assert connection.inspect.stack is call_stacks.frames
    assert call_stacks.install() == []  # a second install changes nothing
    with pytest.raises(PlaywrightError) as refused:
        await session.page.goto("http://127.0.0.1:9/", timeout=5000)
    # the driver's prefix comes from the innermost Playwright frame of the walk
    assert str(refused.value).startswith("Page.goto:"), str(refused.value)
