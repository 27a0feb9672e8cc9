"""An episode that fails before its first step still says what it was for and why it
failed: its summary keeps the task's goal and start URL, and its viewer page shows
them and the error, with no empty screenshot frame.

A real ``linewise run`` whose web task's page cannot be opened (nothing listens on its
port), then ``linewise view``; the page is rendered in headless Chromium.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from linewise.runtime.browser.chromium import BrowserSession
from linewise.testing import ScriptedChatServer, miniwob_solver
from tests.support.cli import linewise

GOAL = "Find the opening hours of the library and tell me when it closes on Sunday."


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
async def test_an_episode_that_failed_to_start_shows_its_goal_and_error(
    tmp_path: Path, session: BrowserSession,
) -> None:
    """Before: "goal (none recorded)", a broken image and no error."""
    url = f"http://127.0.0.1:{_closed_port()}/hours.html"
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(f"tasks:\n  - id: library-hours\n    url: {url}\n    goal: {GOAL}\n")
    out = tmp_path / "run"
    with ScriptedChatServer(miniwob_solver) as llm:
        ran = linewise("run", str(tasks), "--out", str(out), "--base-url", llm.base_url,
                       "--model", "scripted", "--log-json")
        assert not llm.requests  # the episode never reached its first step
    assert ran.returncode == 4, ran.stderr[-3000:]  # an infrastructure ending (the page)
    summary = json.loads((out / "library-hours" / "summary.json").read_text())
    assert (summary["goal"], summary["start_url"]) == (GOAL, url)
    assert summary["n_steps"] == 0 and summary["outcome"] == "infrastructure"
    assert f"Could not open {url}" in summary["error"]

    viewed = linewise("view", str(out))
    assert viewed.returncode == 0, viewed.stderr[-3000:]
    page = session.page
    await page.set_viewport_size({"width": 1200, "height": 700})
    await page.goto((out / "view" / "episodes" / "library-hours.html").as_uri())
    await page.wait_for_selector("body[data-shown='none']")
    await page.screenshot(path=str(tmp_path / "failed-start.png"), full_page=True)
    goal = await page.text_content("#goal") or ""
    assert GOAL in goal and f"start {url}" in goal
    assert await page.is_visible("#error")
    error = await page.text_content("#error") or ""
    assert error.startswith("failed before its first step") and f"Could not open {url}" in error
    assert await page.text_content("#step-label") == "no step recorded"
    # no frame for a screenshot that does not exist (it drew as a broken image), no
    # empty panels or tree
    assert await page.is_hidden("main.episode") and await page.is_hidden("#shot-img")
    assert "infrastructure fault (browser)" in (await page.text_content("#outcome") or "")
