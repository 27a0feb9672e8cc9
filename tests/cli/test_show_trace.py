"""``linewise show-trace`` opens a Playwright trace on the Chromium linewise runs with
(the distribution's, as ``linewise setup`` installs it), under Xvfb: the viewer's window
comes up in that Chromium and its server serves the trace. A chunk of a linewise step
shows the agent's action alone, as a Playwright user would have written it, and
without a display the command says so and how to run it."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import zipfile
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import async_playwright
from playwright.sync_api import sync_playwright

from linewise.cli.main import main
from linewise.runtime.browser.chromium import Browser, find_chromium
from linewise.runtime.playwright_trace import PlaywrightTraceHooks
from linewise.runtime.tasks.schema import WebTask
from linewise.testing import CallInfo, FunctionModel, StaticServer, bid_matching, prompt_section
from tests.support.cli import linewise
from tests.support.episodes import resources_of, run_episode
from tests.support.terminal import xvfb_display

SHOTS = Path("/tmp/see-shots")

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    shutil.which("Xvfb") is None or CHROMIUM is None,
    reason="needs Xvfb and a Chromium (linewise setup --xvfb)",
)


def record_trace(path: Path) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        context = browser.new_context()
        context.tracing.start(screenshots=True, snapshots=True)
        page = context.new_page()
        page.set_content("<button onclick=\"this.textContent='Done'\">Apply</button>")
        page.click("button")
        context.tracing.stop(path=path)
        browser.close()


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, []))
    return found


def listening_ports(pids: list[int]) -> list[int]:
    """The TCP ports on 127.0.0.1/0.0.0.0 those processes listen on."""
    inodes = set()
    for pid in pids:
        try:
            for fd in (Path("/proc") / str(pid) / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def app_window_chromium(pids: list[int]) -> Path | None:
    """The executable of the Chromium that shows the viewer's app window."""
    for pid in pids:
        try:
            cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
            if b"--app=data:text/html," in cmdline:
                return Path(os.readlink(Path("/proc") / str(pid) / "exe"))
        except OSError:
            continue
    return None


def get(port: int, path: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path)
    return connection.getresponse()


@pytest.mark.slow
def test_show_trace_opens_the_trace_in_the_viewer_on_linewise_s_chromium(
    tmp_path: Path,
) -> None:
    assert CHROMIUM is not None
    trace = tmp_path / "step-000.zip"
    record_trace(trace)
    with xvfb_display() as display:
        env = {**os.environ, "DISPLAY": display}
        env.pop("PLAYWRIGHT_BROWSERS_PATH", None)
        process = subprocess.Popen(
            [sys.executable, "-m", "linewise.cli.main", "show-trace", str(trace)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            served = window = None
            while (served is None or window is None) and time.monotonic() < deadline:
                assert process.poll() is None, process.communicate()[0]
                pids = descendants(process.pid)
                window = app_window_chromium(pids)
                for port in listening_ports(pids):
                    redirect = get(port, "/")
                    if redirect.status == 302:
                        served = (port, redirect.getheader("Location") or "")
                time.sleep(0.2)
            assert window is not None and served is not None, "the viewer never came up"
            # the distribution's Chromium (its /usr/bin/chromium is a script that starts
            # /usr/lib/chromium/chromium), not a build of Playwright's
            launcher = Path(CHROMIUM).resolve()
            assert "ms-playwright" not in str(window)
            assert window == launcher or not launcher.read_bytes().startswith(b"\x7fELF")
            port, location = served
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
            assert query["trace"] == [str(trace.resolve())]
            body = get(port, "/trace/file?" + urllib.parse.urlencode({"path": trace})).read()
            assert body == trace.read_bytes()
        finally:
            os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl+C
            try:
                process.wait(timeout=20)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)


def test_show_trace_of_a_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show-trace", str(tmp_path / "step-001.zip")]) == 2
    assert "no such trace file" in capsys.readouterr().err


def test_show_trace_without_a_display_names_it_and_the_fix(tmp_path: Path) -> None:
    """Without a display the viewer's Chromium cannot open its window: the driver would
    fail with "Protocol error (Browser.getVersion)"."""
    trace = tmp_path / "step-000.zip"
    record_trace(trace)
    started = time.monotonic()
    result = linewise("show-trace", str(trace), env={"DISPLAY": "", "WAYLAND_DISPLAY": ""},
                      timeout=60)
    assert result.returncode == 2, result.stderr
    assert time.monotonic() - started < 30
    assert ("show-trace opens Playwright's trace viewer in a browser window, which needs a "
            "display, and there is no display: DISPLAY and WAYLAND_DISPLAY are not set."
            ) in result.stderr
    assert f"Run it under a virtual display:  xvfb-run -a linewise show-trace {trace}\n" in (
        result.stderr)
    assert "Protocol error" not in result.stderr and "Traceback" not in result.stderr


def clicks_the_button(messages: list[dict[str, Any]], info: CallInfo) -> str:
    prompt = messages[1]["content"]
    bid = bid_matching(prompt_section(prompt, "Current page"), r"button 'Click me'")
    return f"<think>Click it.</think><action>click('{bid}')</action>"


async def viewer_actions(trace: Path, shot: Path) -> list[str]:
    """The trace viewer's list of actions for ``trace``, as ``linewise show-trace``
    serves it under Xvfb, read in a headless Chromium of Playwright's (a linewise
    session's navigation policy is no place for the viewer's service worker)."""
    with xvfb_display() as display:
        env = {**os.environ, "DISPLAY": display}
        process = subprocess.Popen(
            [sys.executable, "-m", "linewise.cli.main", "show-trace", str(trace)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            served = None
            while served is None and time.monotonic() < deadline:
                assert process.poll() is None, process.communicate()[0]
                for port in listening_ports(descendants(process.pid)):
                    redirect = get(port, "/")
                    if redirect.status == 302:
                        served = f"http://127.0.0.1:{port}{redirect.getheader('Location')}"
                time.sleep(0.2)
            assert served is not None, "the viewer never came up"
            async with async_playwright() as playwright:
                viewer = await playwright.chromium.launch(executable_path=CHROMIUM)
                page = await viewer.new_page(viewport={"width": 1280, "height": 800})
                await page.goto(served)
                titles = page.locator(".list-view-entry .action-title")
                await titles.first.wait_for()
                found = await titles.all_inner_texts()
                await page.screenshot(path=str(shot))
                await viewer.close()
            return found
        finally:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=20)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.slow
async def test_a_steps_chunk_shows_the_agents_action_not_linewise_s_own_calls(
    browser: Browser, pages: StaticServer, tmp_path: Path,
) -> None:
    """Finding the observed element, measuring its box, watching for a popup and
    waiting for the page to settle are linewise's calls, not the agent's: the chunk of
    a click lists the click alone, under the step's action as its title."""
    task = WebTask(id="form", url=pages.url("form.html"), goal="Click the button",
                   max_steps=1)
    model = FunctionModel(clicks_the_button)
    summary = await run_episode(task, resources_of(browser, model), tmp_path,
                                hooks=[PlaywrightTraceHooks()])
    assert summary.directory is not None
    chunk = summary.directory / "playwright-trace" / "step-000.zip"
    with zipfile.ZipFile(chunk) as archive:
        events = [json.loads(line) for line in
                  archive.read("trace.trace").decode("utf-8").splitlines()]
    [options] = [e for e in events if e["type"] == "context-options"]
    assert re.fullmatch(r"click\('\d+'\)", options["title"])
    calls = [e["apiName"] for e in events if e["type"] == "before"]
    assert calls == ["ElementHandle.click"]
    # the click happened, and the chunk holds the page before and after it
    assert any(e["type"] == "frame-snapshot" for e in events)
    SHOTS.mkdir(exist_ok=True)
    shown = await viewer_actions(chunk, SHOTS / "show-trace-step.png")
    assert shown == ["ElementHandle.click"]
