"""MiniWoB++ offline: the local server, seeded episodes and reward reading on real Chromium."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import structlog.testing
from playwright.async_api import Page

from linewise.errors import BrowserError
from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.log import configure_logging
from linewise.runtime.tasks.miniwob import (
    EPISODE_MAX_TIME_MS,
    MiniWoBStatus,
    read_miniwob_status,
    start_miniwob_episode,
)
from linewise.runtime.tasks.miniwob_server import MiniWoBServer, available_tasks

# Text of the human display that must never reach the model.
HUMAN_DISPLAY_TEXT = ["START", "Last reward", "Last 10 average", "Time left", "Episodes done"]


@pytest.fixture(scope="module")
def server() -> Iterator[MiniWoBServer]:
    srv = MiniWoBServer()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def page(session: BrowserSession) -> Page:
    """A fresh tab of the suite's shared Chromium (see conftest)."""
    return session.page


def ax_text(snapshot: dict[str, Any] | None) -> str:
    """Every name and value in a Playwright accessibility snapshot, as one string."""
    return json.dumps(snapshot, ensure_ascii=False)


# --------------------------------------------------------------------------- server


def test_available_tasks_lists_the_package_pages() -> None:
    names = available_tasks()

    assert len(names) > 100
    assert names == sorted(names)
    assert {"click-test", "click-button", "enter-text", "book-flight"} <= set(names)


def test_server_urls_and_static_files(server: MiniWoBServer, capfd: pytest.CaptureFixture) -> None:
    url = server.url_for("click-test")
    assert url == f"http://127.0.0.1:{server.port}/miniwob/click-test.html"
    assert server.base_url == f"http://127.0.0.1:{server.port}/miniwob/"

    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.headers["Content-Type"] == "text/html; charset=utf-8"
        assert b"../core/core.js" in response.read()
    with urllib.request.urlopen(
        f"http://127.0.0.1:{server.port}/core/core.js", timeout=5
    ) as response:
        assert b"core.startEpisodeReal" in response.read()
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"{server.base_url}no-such-task.html", timeout=5)

    # No request log lines on stderr, not even for the 404.
    assert "GET /" not in capfd.readouterr().err


def test_url_for_unknown_task_suggests_a_name(server: MiniWoBServer) -> None:
    with pytest.raises(ValueError, match="did you mean 'click-test'"):
        server.url_for("clik-test")


async def test_server_as_async_context_manager() -> None:
    async with MiniWoBServer() as srv:
        assert srv.running
        port = srv.port
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(srv.url_for("click-test"), timeout=5).read()
        )
        assert b"Click Test Task" in body
    assert not srv.running
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)


def test_servers_prefer_one_fixed_port_and_fall_back_to_a_free_one() -> None:
    """The URL is in every prompt: the first server of a machine serves on the same port
    run after run; a second one, or a taken port, falls back to a free port."""
    first, second = MiniWoBServer(), MiniWoBServer()
    with socket.socket() as probe:
        preferred_free = probe.connect_ex(("127.0.0.1", MiniWoBServer.PREFERRED_PORT)) != 0
    first.start()
    second.start()
    try:
        assert first.port != second.port
        assert second.port != MiniWoBServer.PREFERRED_PORT
        if preferred_free:
            assert first.port == MiniWoBServer.PREFERRED_PORT
        taken = MiniWoBServer(port=first.port)
        with pytest.raises(BrowserError, match="cannot start the MiniWoB"):
            taken.start()  # an explicit port is a demand, not a preference
    finally:
        first.stop()
        second.stop()


def test_a_busy_port_is_logged_with_the_port_served_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The log says which port the pages are on, not only which one was taken."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy_port = holder.getsockname()[1]
        monkeypatch.setattr(MiniWoBServer, "PREFERRED_PORT", busy_port)
        server = MiniWoBServer()
        configure_logging(json_lines=False, level="INFO")  # the line is info
        try:
            with structlog.testing.capture_logs() as logs:
                server.start()
        finally:
            configure_logging(json_lines=False, level="WARNING")
        try:
            [busy] = [entry for entry in logs if entry["event"] == "miniwob_port_busy"]
            assert busy["port"] == server.port != busy_port
            assert busy["busy_port"] == busy_port
        finally:
            server.stop()


# --------------------------------------------------------------------------- episodes


async def test_click_test_episode(page: Page, server: MiniWoBServer) -> None:
    goal = await start_miniwob_episode(page, "click-test", 3, server)

    assert goal == "Click the button."
    assert await page.evaluate("core.EPISODE_MAX_TIME") == EPISODE_MAX_TIME_MS
    status = await read_miniwob_status(page)
    assert status == MiniWoBStatus(reward=0.0, raw_reward=0.0, done=False, reason=None)

    # The human display is in the DOM (core needs it) but not in the accessibility tree.
    tree = ax_text(await page.accessibility.snapshot())
    assert "Click Me!" in tree
    assert goal not in tree
    for text in HUMAN_DISPLAY_TEXT:
        assert text not in tree
    assert await page.locator("#query").count() == 1
    assert not await page.locator("#query").is_visible()
    assert not await page.locator("#sync-task-cover").is_visible()

    await page.click("#subbtn")

    status = await read_miniwob_status(page)
    assert status.done is True
    assert status.reward == 1.0
    assert 0 < status.raw_reward <= 1.0
    # core.endEpisode() shows the START cover again: it must stay hidden.
    assert not await page.locator("#sync-task-cover").is_visible()
    tree = ax_text(await page.accessibility.snapshot())
    for text in HUMAN_DISPLAY_TEXT:
        assert text not in tree


async def test_wrong_answer_gives_reward_zero(page: Page, server: MiniWoBServer) -> None:
    goal = await start_miniwob_episode(page, "click-button", 0, server)
    target = goal.split('"')[1]
    buttons = await page.locator("#area button").all_inner_texts()
    wrong = next(text for text in buttons if text != target)

    await page.get_by_role("button", name=wrong, exact=True).click()

    status = await read_miniwob_status(page)
    assert status.done is True
    assert status.raw_reward < 0
    assert status.reward == 0.0


async def test_correct_answer_on_a_seeded_task(page: Page, server: MiniWoBServer) -> None:
    goal = await start_miniwob_episode(page, "click-button", 0, server)
    target = goal.split('"')[1]

    await page.get_by_role("button", name=target, exact=True).click()

    status = await read_miniwob_status(page)
    assert (status.done, status.reward) == (True, 1.0)


async def test_same_seed_same_goal(page: Page, server: MiniWoBServer) -> None:
    first = await start_miniwob_episode(page, "click-button", 11, server)
    buttons_first = await page.locator("#area button").all_inner_texts()
    second = await start_miniwob_episode(page, "click-button", 11, server)
    buttons_second = await page.locator("#area button").all_inner_texts()

    assert first == second
    assert buttons_first == buttons_second


async def test_different_seeds_can_differ(page: Page, server: MiniWoBServer) -> None:
    goals = {await start_miniwob_episode(page, "click-button", seed, server) for seed in range(6)}

    assert len(goals) > 1


async def test_goal_from_dict_utterance(page: Page, server: MiniWoBServer) -> None:
    # email-inbox-nl-turk's core.getUtterance() returns {utterance, fields}.
    goal = await start_miniwob_episode(page, "email-inbox-nl-turk", 1, server)

    assert isinstance(goal, str)
    assert goal
    assert not goal.startswith("{")


async def test_unicode_goal_is_decoded_as_utf8(page: Page, server: MiniWoBServer) -> None:
    goals = [await start_miniwob_episode(page, "unicode-test", seed, server) for seed in range(4)]

    assert not any("Ã" in goal for goal in goals)


@pytest.mark.slow
async def test_episode_does_not_time_out(page: Page, server: MiniWoBServer) -> None:
    await start_miniwob_episode(page, "click-test", 1, server)
    # The page's own default is 10 s; make sure no short timer is pending either.
    await page.evaluate("() => new Promise((resolve) => setTimeout(resolve, 1500))")

    status = await read_miniwob_status(page)
    assert status.done is False


async def test_navigating_away_ends_the_episode(page: Page, server: MiniWoBServer) -> None:
    await start_miniwob_episode(page, "click-test", 1, server)

    await page.goto("about:blank")
    away = await read_miniwob_status(page)
    assert (away.done, away.reward) == (True, 0.0)
    assert away.reason is not None
    assert "navigated away" in away.reason

    # Another MiniWoB++ page (or a reload) has core.js but no running episode.
    await page.goto(server.url_for("click-button"))
    replaced = await read_miniwob_status(page)
    assert (replaced.done, replaced.reward) == (True, 0.0)
    assert replaced.reason is not None
    assert "no episode" in replaced.reason
