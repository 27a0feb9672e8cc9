"""``linewise show-trace`` opens a Playwright trace on the Chromium linewise runs with
(the distribution's, as ``linewise setup`` installs it), under Xvfb: the viewer's window
comes up in that Chromium and its server serves the trace."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from linewise.cli.main import main
from linewise.runtime.browser.chromium import find_chromium
from tests.support.terminal import xvfb_display

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
