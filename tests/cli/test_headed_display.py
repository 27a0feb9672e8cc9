"""``--headed`` on a machine without a display fails at once, naming the fix, instead
of hanging for Playwright's 3-minute launch timeout and then blaming the Chromium
install: in a terminal (tmux), for ``bench`` too, and through the Python API."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from linewise.cli.main import main
from linewise.errors import ConfigError
from linewise.runtime.browser.chromium import Browser, BrowserConfig
from linewise.runtime.browser.display import display_problem, x_server_listens
from linewise.testing import ScriptedChatServer
from tests.support.cli import linewise
from tests.support.terminal import linewise_in_pane, needs_terminal, xvfb_display


def unused_display() -> str:
    """A local X display number no X server listens on."""
    return next(f":{n}" for n in range(900, 1000) if not x_server_listens(n))


@pytest.mark.slow
@needs_terminal
def test_a_headed_run_without_a_display_fails_at_once_naming_the_fix(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["run", "--url", "http://127.0.0.1:9/", "--goal", "Read it", "--headed",
            "--step", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
            "--api-key", "sk-not-to-be-shown", "--out", str(out)]
    started = time.monotonic()
    with linewise_in_pane(args, tmp_path, None) as pane:
        code = pane.wait_exit(timeout_s=60)
        text = pane.text()
    assert code == 2, text
    assert time.monotonic() - started < 30  # Python's start-up, on a loaded machine
    assert ("linewise: error: --headed needs a display to open the browser window, and "
            "there is no display: DISPLAY and WAYLAND_DISPLAY are not set.") in text, text
    # The same command, ready to paste, under xvfb-run; the key is not repeated.
    assert re.search(r"Run it under a virtual display:  xvfb-run -a linewise run --url "
                     r"http://127\.0\.0\.1:9/ --goal 'Read it' --headed --step .*"
                     r"--api-key … --out ", text), text
    assert "`linewise setup --xvfb` installs Xvfb and xvfb-run" in text
    assert "sk-not-to-be-shown" not in text and "Traceback" not in text
    assert not out.exists()  # refused before anything started


@pytest.mark.slow
def test_a_headed_bench_with_a_display_that_is_gone_fails_at_once(tmp_path: Path) -> None:
    """A DISPLAY left behind by an ended Xvfb or ssh session hangs Chromium the same
    way: the X server it names must be listening."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("tasks:\n  - {id: t, url: 'http://127.0.0.1:9/', goal: g}\n")
    display = unused_display()
    started = time.monotonic()
    with ScriptedChatServer(lambda messages: "<action>noop()</action>") as llm:
        result = linewise("bench", str(tasks), "--headed", "--out", str(tmp_path / "bench"),
                          "--base-url", llm.base_url, "--model", "scripted",
                          env={"DISPLAY": display, "WAYLAND_DISPLAY": ""}, timeout=60)
    assert result.returncode == 2, result.stderr
    assert time.monotonic() - started < 30
    assert (f"--headed needs a display to open the browser window, and DISPLAY={display} "
            "names no running X server") in result.stderr
    assert "xvfb-run -a linewise bench " in result.stderr
    assert not (tmp_path / "bench").exists()


async def test_the_python_api_refuses_a_headed_browser_without_a_display(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"a headed Chromium needs a display.*xvfb-run"):
        await Browser(BrowserConfig(headless=False)).start()
    assert time.monotonic() - started < 5


def test_what_counts_as_a_display(tmp_path: Path) -> None:
    gone = unused_display()
    assert display_problem({}) is not None
    assert display_problem({"DISPLAY": gone}) is not None
    assert display_problem({"DISPLAY": f"unix{gone}.0"}) is not None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}) is None
    assert display_problem({"DISPLAY": "remote.example:10.0"}) is None  # taken on trust
    assert display_problem({}, platform="darwin") is None


@needs_terminal
def test_a_running_xvfb_is_a_display() -> None:
    with xvfb_display() as display:
        assert display_problem({"DISPLAY": display}) is None
        assert display_problem({"DISPLAY": f"{display}.0"}) is None


@pytest.mark.parametrize("command", [
    ["snapshot", "http://127.0.0.1:9/"],
    ["improve", "TASKS", "--train-seeds", "0-1", "--test-seeds", "2-3", "--rounds", "1",
     "--out", "OUT"],
])
def test_every_command_with_headed_refuses_it_without_a_display(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("tasks:\n  - {id: t, url: 'http://127.0.0.1:9/', goal: g}\n")
    argv = [str(tasks) if a == "TASKS" else str(tmp_path / "out") if a == "OUT" else a
            for a in command]
    monkeypatch.setattr(sys, "argv", ["linewise", *argv, "--headed"])
    assert main(sys.argv[1:]) == 2
    stderr = capsys.readouterr().err
    assert "--headed needs a display" in stderr, stderr
    assert f"xvfb-run -a linewise {command[0]} " in stderr
    assert not (tmp_path / "out").exists()
