"""Browser faults end the step in bounded time, the step is written, and the run goes on.

Real Chromium on local pages, a scripted in-process model (``FunctionModel``): each test
builds one stall (a refused iframe, a dialog loop, a navigation to a server that never
answers, a crashed renderer, a killed Chromium) and checks both the deadline and the
trace.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.browser.chromium import Browser, BrowserConfig
from linewise.runtime.envs.chromium import ChromiumEnv
from linewise.runtime.episode import EpisodeConfig, StepContext, StepHooks, run_in_environment
from linewise.runtime.run import run_tasks
from linewise.runtime.tasks.browser_task import WebBrowserTask
from linewise.runtime.tasks.schema import WebTask
from linewise.runtime.trace import read_steps, read_summary
from linewise.settings import BrowserSettings, LinewiseSettings, NavigationSettings
from linewise.testing import CallInfo, FunctionModel, StaticServer, bid_matching, prompt_section
from linewise.testing.processes import chromium_pids

FAST = BrowserSettings(
    action_timeout_ms=1000, navigation_timeout_ms=2000, observe_timeout_ms=8000,
    frame_timeout_ms=1000, settle_timeout_ms=2000, close_timeout_ms=3000,
    navigation=NavigationSettings(allow_private=True),
)
"""Short deadlines, so every stall below ends within seconds; the stalling servers are
on other loopback ports than the pages."""

PAGES = {
    "iframe-file.html": '<button>Go</button><iframe src="file:///etc/hostname"></iframe>',
    "iframe-chrome.html": '<button>Go</button><iframe src="chrome://version"></iframe>',
    "alert-interval.html": (
        "<button>Go</button><script>window.addEventListener('load', () => "
        "setTimeout(() => setInterval(() => alert('again'), 30), 100));</script>"
    ),
    "alert-forever.html": '<button onclick="while (true) { alert(\'forever\'); }">Go</button>',
    "plain.html": "<title>Plain</title><button>Go</button>",
}


@pytest.fixture(scope="module")
def fault_pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StaticServer]:
    root = tmp_path_factory.mktemp("fault-pages")
    for name, html in PAGES.items():
        (root / name).write_text(f"<!doctype html><html><body>{html}</body></html>")
    with StaticServer(root) as server:
        yield server


@pytest.fixture(scope="module")
async def fast_browser() -> AsyncIterator[Browser]:
    async with Browser(BrowserConfig.from_settings(FAST)) as browser:
        yield browser


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stopped = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stopped.is_set():
            try:
                held.append(listener.accept()[0])
            except (TimeoutError, OSError):
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/never"
    stopped.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


def click_then_report(messages: list[dict[str, Any]], info: CallInfo) -> str:
    """Click the Go button once, then tell the user."""
    if info.index == 0:
        tree = prompt_section(messages[1]["content"], "Current page")
        return f"<think>Go.</think><action>click('{bid_matching(tree, 'button .Go')}')</action>"
    return "<think>Done.</think><action>send_msg_to_user('done')</action>"


async def run_page(
    browser: Browser,
    url: str,
    directory: Path,
    model: FunctionModel,
    *,
    timeout_s: float = 30.0,
    hooks: tuple[StepHooks, ...] = (),
    env: ChromiumEnv | None = None,
) -> tuple[EpisodeSummary, list[StepRecord], float]:
    task = WebTask(id="fault", url=url, goal="Press Go, then report.", max_steps=4)
    env = env or ChromiumEnv(browser, WebBrowserTask(task))
    started = time.monotonic()
    summary = await run_in_environment(
        env, task.id, task.max_steps, model, directory,
        EpisodeConfig(screenshots=False, timeout_s=timeout_s), hooks,
    )
    wall = time.monotonic() - started
    assert read_summary(directory).model_dump() == summary.model_dump()
    steps = read_steps(directory) if (directory / "steps.jsonl").exists() else []
    assert summary.n_steps == len(steps)
    return summary, steps, wall


@pytest.fixture(scope="module")
async def unguarded_browser() -> AsyncIterator[Browser]:
    """Without the navigation policy, which would block these iframes before they load:
    the frame deadline must hold on its own."""
    settings = FAST.model_copy(update={"navigation": NavigationSettings(enforce=False)})
    async with Browser(BrowserConfig.from_settings(settings)) as browser:
        yield browser


@pytest.mark.slow
@pytest.mark.parametrize("page", ["iframe-file.html", "iframe-chrome.html"])
async def test_a_refused_iframe_is_skipped_and_recorded(
    unguarded_browser: Browser, fault_pages: StaticServer, tmp_path: Path, page: str
) -> None:
    summary, steps, wall = await run_page(
        unguarded_browser, fault_pages.url(page), tmp_path, FunctionModel(click_then_report)
    )
    assert summary.termination == "agent_done" and summary.answer == "done", summary
    # the model may be told that Chromium itself refused the frame's source; nothing else
    assert all(s.action_error is None or "refused to open" in s.action_error for s in steps)
    for step in steps:
        assert len(step.skipped_frames) == 1, step.skipped_frames
        assert "did not answer" in step.skipped_frames[0].reason
        assert "button 'Go'" in step.axtree
    assert wall < 15


@pytest.mark.slow
async def test_the_episode_timeout_fires_even_inside_a_refused_iframe(
    tmp_path: Path, fault_pages: StaticServer
) -> None:
    """With frame deadlines longer than the episode, its own timeout still ends it."""
    slow_frames = BrowserSettings(frame_timeout_ms=60_000, observe_timeout_ms=60_000)
    async with Browser(BrowserConfig.from_settings(slow_frames)) as browser:
        summary, steps, wall = await run_page(
            browser, fault_pages.url("iframe-file.html"), tmp_path,
            FunctionModel(click_then_report), timeout_s=3.0,
        )
    assert summary.termination == "timeout" and summary.status == "failed", summary
    assert steps == []
    assert wall < 12


@pytest.mark.slow
async def test_an_alert_loop_is_dismissed_and_the_page_stays_observable(
    fast_browser: Browser, fault_pages: StaticServer, tmp_path: Path
) -> None:
    def wait_then_report(messages: list[dict[str, Any]], info: CallInfo) -> str:
        if info.index < 2:
            return "<think>Wait.</think><action>noop(300)</action>"
        return "<think>Done.</think><action>send_msg_to_user('done')</action>"

    summary, steps, wall = await run_page(
        fast_browser, fault_pages.url("alert-interval.html"), tmp_path,
        FunctionModel(wait_then_report),
    )
    assert summary.termination == "agent_done", summary
    assert len(steps) >= 2 and all("button 'Go'" in s.axtree for s in steps)
    dialogs = [d for s in steps for d in s.dialogs]
    assert len(dialogs) >= 5
    assert {(d.type, d.message, d.handled) for d in dialogs} == {("alert", "again", "dismissed")}
    assert wall < 15


@pytest.mark.slow
async def test_a_page_stuck_in_an_alert_loop_ends_the_episode_with_the_step_written(
    fast_browser: Browser, fault_pages: StaticServer, tmp_path: Path
) -> None:
    """``while (true) alert()`` never lets a script run again: the click's step is kept,
    the next observation passes its deadline and the episode ends as stalled."""
    summary, steps, wall = await run_page(
        fast_browser, fault_pages.url("alert-forever.html"), tmp_path,
        FunctionModel(click_then_report),
    )
    assert summary.termination == "stalled" and summary.status == "failed", summary
    assert "observe" in (summary.error or "")
    assert len(steps) == 1 and steps[0].action is not None and steps[0].action.startswith("click")
    assert wall < 20


@pytest.mark.slow
async def test_a_goto_to_a_server_that_never_answers_is_bounded(
    fast_browser: Browser, fault_pages: StaticServer, silent_server: str, tmp_path: Path
) -> None:
    def goto_then_report(messages: list[dict[str, Any]], info: CallInfo) -> str:
        if info.index == 0:
            return f"<think>Go there.</think><action>goto('{silent_server}')</action>"
        return "<think>Done.</think><action>send_msg_to_user('done')</action>"

    summary, steps, wall = await run_page(
        fast_browser, fault_pages.url("plain.html"), tmp_path, FunctionModel(goto_then_report)
    )
    assert len(steps) >= 1 and steps[0].action == f"goto('{silent_server}')"
    # a timeout of the navigation, or of the navigation guard's own fetch of the document
    error = steps[0].action_error or ""
    assert "Timeout" in error or "ERR_FAILED" in error, error
    assert summary.termination == "agent_done", summary
    assert wall < 20


class CrashBeforeAct(StepHooks):
    """Crashes the tab's renderer once the model has answered (as a page at 4 GB would)."""

    def __init__(self, env: ChromiumEnv) -> None:
        self.env = env

    async def before_act(self, step: StepContext) -> None:
        page = self.env.session.page
        cdp = await page.context.new_cdp_session(page)
        crash = asyncio.ensure_future(cdp.send("Page.crash"))
        crash.add_done_callback(lambda done: done.cancelled() or done.exception())
        # the crash is known to the session before the action starts, even on a busy machine
        await asyncio.wait_for(self.env.session.faulted.wait(), 10)


async def test_a_renderer_crash_ends_the_episode_with_the_step_written(
    fast_browser: Browser, fault_pages: StaticServer, tmp_path: Path
) -> None:
    task = WebTask(id="fault", url=fault_pages.url("plain.html"), goal="Press Go.", max_steps=4)
    env = ChromiumEnv(fast_browser, WebBrowserTask(task))
    summary, steps, wall = await run_page(
        fast_browser, task.url, tmp_path, FunctionModel(click_then_report),
        hooks=(CrashBeforeAct(env),), env=env,
    )
    assert summary.termination == "renderer_crash" and summary.status == "failed", summary
    assert len(steps) == 1
    failure = steps[0].failure
    assert failure is not None and failure.kind == "renderer_crash"
    assert failure.stage == "act" and steps[0].action_raw and steps[0].llm_calls
    assert wall < 10


@pytest.mark.slow
async def test_a_killed_chromium_is_relaunched_for_the_next_tasks(
    fault_pages: StaticServer, tmp_path: Path
) -> None:
    tasks = [WebTask(id=f"task-{n}", url=fault_pages.url("plain.html"), goal=f"Task {n}.",
                     max_steps=3) for n in range(3)]
    killed: list[int] = []

    def answer(messages: list[dict[str, Any]], info: CallInfo) -> str:
        goal = prompt_section(messages[1]["content"], "Goal")
        if "Task 1" in goal and not killed:
            killed.append(chromium_pids(os.getpid())[-1])
            os.kill(killed[0], signal.SIGKILL)
            return "<think>Wait.</think><action>noop(500)</action>"
        return "<think>Done.</think><action>send_msg_to_user('done')</action>"

    settings = LinewiseSettings(browser=FAST, screenshots=False, episode_timeout_s=30)
    started = time.monotonic()
    summaries = await run_tasks(tasks, settings, tmp_path,
                                action_model=FunctionModel(answer), argv=["test"])
    assert killed
    assert [s.termination for s in summaries] == ["agent_done", "browser_crash", "agent_done"]
    crashed = read_steps(tmp_path / "task-1")
    assert len(crashed) == 1 and crashed[0].failure is not None
    assert crashed[0].failure.kind == "browser_crash" and crashed[0].action == "noop(500.0)"
    assert read_summary(tmp_path / "task-2").answer == "done"
    assert time.monotonic() - started < 40
