"""Ctrl+C, SIGTERM and SIGHUP on ``linewise run`` in a real subprocess: Ctrl+C once
stops after the step, twice at once; SIGTERM (``timeout``, ``docker stop``, CI) stops
like the first press, or at once when the step does not end within the grace period;
SIGHUP (a closed terminal: here a real pseudo-terminal whose other end is closed) stops
as SIGTERM does, unless the command runs under ``nohup``.

Either way every step line is complete JSON, the summary says ``stopped`` and no
process the run started is left behind; Ctrl+C exits 130, SIGTERM 143, SIGHUP 129.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from linewise.cli.interrupt import TERM_GRACE_S
from linewise.testing import Fault, ScriptedChatServer, StaticServer
from linewise.testing.processes import chromium_pids, descendants


def waiting_script(messages: list[dict[str, Any]]) -> str:
    return "<think>Wait.</think><action>noop(200)</action>"


def hangup_by_default() -> None:
    """In the child, before it runs: SIGHUP as a terminal's command has it. A test runner
    started under ``nohup`` hands its children SIGHUP ignored, and linewise then keeps
    running on a hangup, as asked (``test_under_nohup_sighup_leaves_the_run_going``)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start_run(llm: ScriptedChatServer, url: str, out: Path,
              prefix: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    return subprocess.Popen(
        [*prefix, sys.executable, "-m", "linewise.cli.main", "run", "--url", url, "--goal",
         "Wait", "--max-steps", "200", "--base-url", llm.base_url, "--model", "scripted",
         "--out", str(out), "--no-screenshots", "--repeat-escapes", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean,
        # its own process group, as under `timeout`, which signals the whole group
        start_new_session=True, preexec_fn=hangup_by_default,
    )


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (when it started): a pid and this name one process
    even if the pid is reused; None once it has ended (or is a zombie)."""
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def children_of(pid: int) -> dict[int, str]:
    """Every process below ``pid`` (its Playwright driver, Chromium and Chromium's
    helpers), each with its start time."""
    found = {child: start_time(child) for child in descendants(pid)}
    return {child: started for child, started in found.items() if started is not None}


def still_running(children: dict[int, str], wait_s: float = 3) -> list[str]:
    """The command lines of ``children`` still running after ``wait_s``: Chromium's
    helpers may take a moment to go once its browser process has, an orphan never goes."""
    deadline = time.monotonic() + wait_s
    while True:
        left = [pid for pid, started in children.items() if start_time(pid) == started]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    names = []
    for pid in left:
        try:
            names.append((Path("/proc") / str(pid) / "cmdline").read_bytes()[:120].decode())
        except OSError:
            continue
    return names


def wait_for_steps(out: Path, count: int, timeout_s: float = 40) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        # An episode folder is made under a hidden ".<name>.starting" and renamed into
        # place: only a named folder is the trace.
        # The walk itself may meet that hidden folder just as it is renamed away.
        try:
            found = [p for p in out.rglob("steps.jsonl")
                     if not p.parent.name.startswith(".")]
            if found and len(found[0].read_text().splitlines()) >= count:
                return found[0].parent
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"the run never wrote {count} steps")


def read_trace(folder: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps = [json.loads(line) for line in (folder / "steps.jsonl").read_text().splitlines()]
    assert [s["index"] for s in steps] == list(range(len(steps)))
    summary = json.loads((folder / "summary.json").read_text())
    return steps, summary


@pytest.mark.slow
def test_one_ctrl_c_stops_after_the_current_step(pages: StaticServer, tmp_path: Path) -> None:
    with ScriptedChatServer(waiting_script, delay_s=0.3) as llm:
        process = start_run(llm, pages.url("form.html"), tmp_path)
        folder = wait_for_steps(tmp_path, 2)
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, stderr = process.communicate(timeout=30)
        stopped_in = time.monotonic() - sent
    assert process.returncode == 130, stderr
    assert "stopping after the current step" in stderr
    steps, summary = read_trace(folder)
    assert summary["status"] == "stopped" and summary["termination"] == "interrupted"
    assert summary["n_steps"] == len(steps) >= 2
    assert all(s["failure"] is None and s["action"] == "noop(200.0)" for s in steps)
    assert stopped_in < 10


@pytest.mark.slow
def test_two_ctrl_c_stop_at_once_and_still_write_the_summary(
    pages: StaticServer, tmp_path: Path
) -> None:
    with ScriptedChatServer(waiting_script, delay_s=0.3) as llm:
        process = start_run(llm, pages.url("form.html"), tmp_path)
        folder = wait_for_steps(tmp_path, 1)
        process.send_signal(signal.SIGINT)
        time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, stderr = process.communicate(timeout=30)
        stopped_in = time.monotonic() - sent
    assert process.returncode == 130, stderr
    steps, summary = read_trace(folder)
    # The second press stops the same run sooner: still stopped, never "failed".
    assert summary["status"] == "stopped" and summary["termination"] == "interrupted", summary
    assert summary["finished_at"] is not None and summary["n_steps"] == len(steps)
    assert stopped_in < 10


@pytest.mark.slow
@pytest.mark.parametrize("to", ["process", "group"])
@pytest.mark.parametrize(("signum", "code", "said"), [
    (signal.SIGTERM, 143, "Stopped by SIGTERM"),
    (signal.SIGHUP, 129, "Stopped by SIGHUP (the terminal was closed)"),
], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_stops_after_the_step_and_ends_every_child(
    signum: int, code: int, said: str, to: str, pages: StaticServer, tmp_path: Path
) -> None:
    """``docker stop`` signals the process; ``timeout`` and CI runners its whole process
    group, Playwright's driver included, as a shell does with SIGHUP when its terminal
    is closed: the driver must leave Chromium to linewise."""
    name = signal.Signals(signum).name
    with ScriptedChatServer(waiting_script, delay_s=0.3) as llm:
        process = start_run(llm, pages.url("form.html"), tmp_path)
        folder = wait_for_steps(tmp_path, 2)
        children = children_of(process.pid)
        assert chromium_pids(process.pid), children  # the run's Chromium is among them
        if to == "group":
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        sent = time.monotonic()
        stdout, stderr = process.communicate(timeout=30)
        stopped_in = time.monotonic() - sent
    assert process.returncode == code, stderr
    assert f"{name}: stopping after the current step" in stderr
    assert "Traceback" not in stderr and "EPIPE" not in stderr, stderr
    assert re.search(r"^adhoc +stopped ", stdout, re.MULTILINE), stdout
    assert f"{said}; traces in {tmp_path}/" in stdout
    steps, summary = read_trace(folder)
    assert summary["status"] == "stopped" and summary["termination"] == "interrupted"
    assert summary["n_steps"] == len(steps) >= 2
    assert all(s["failure"] is None and s["action"] == "noop(200.0)" for s in steps)
    assert stopped_in < 10
    assert still_running(children) == []


@pytest.mark.slow
def test_sigterm_during_a_long_step_stops_at_once_after_the_grace_period(
    pages: StaticServer, tmp_path: Path
) -> None:
    """The sender kills after its own grace period (``docker stop``: 10 s): a step
    waiting on a slow model is cut short after ``TERM_GRACE_S``, its summary written."""
    with ScriptedChatServer(waiting_script, delay_s=0.3) as llm:
        process = start_run(llm, pages.url("form.html"), tmp_path)
        folder = wait_for_steps(tmp_path, 1)
        llm.inject(Fault.stall(600))  # the next answer never comes in time
        while llm.pending_faults:  # until the run is waiting for it
            time.sleep(0.05)
        children = children_of(process.pid)
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, stderr = process.communicate(timeout=30)
        stopped_in = time.monotonic() - sent
    assert process.returncode == 143, stderr
    assert f"stopping now ({TERM_GRACE_S:g} s passed)" in stderr, stderr
    assert TERM_GRACE_S <= stopped_in < TERM_GRACE_S + 8
    steps, summary = read_trace(folder)
    assert summary["status"] == "stopped" and summary["termination"] == "interrupted"
    assert summary["n_steps"] == len(steps) and summary["finished_at"] is not None
    assert still_running(children) == []


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code", "said"), [
    (signal.SIGINT, 130, "Interrupted"), (signal.SIGTERM, 143, "Stopped by SIGTERM")])
def test_one_ctrl_c_or_sigterm_on_a_bench_leaves_the_stopped_episode_to_resume(
    signum: int, code: int, said: str, pages: StaticServer, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("tasks:\n" + "".join(
        f"  - {{id: wait-{n}, url: '{pages.url('form.html')}', goal: Wait, max_steps: 200}}\n"
        for n in range(3)
    ))
    out = tmp_path / "bench"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    with ScriptedChatServer(waiting_script, delay_s=0.3) as llm:
        process = subprocess.Popen(
            [sys.executable, "-m", "linewise.cli.main", "bench", str(tasks), "--out", str(out),
             "--concurrency", "1", "--base-url", llm.base_url, "--model", "scripted",
             "--no-screenshots", "--repeat-escapes", "0", "--no-report", "--log-json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean,
        )
        folder = wait_for_steps(out, 2)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == code, stderr
    assert f"{said}: stopped episodes are rerun by --resume" in stdout
    steps, summary = read_trace(folder)
    assert summary["status"] == "stopped" and summary["n_steps"] == len(steps)
    results = out / "results.jsonl"
    assert not results.exists() or results.read_text().strip() == ""
    assert len(list(out.rglob("summary.json"))) == 1  # no other episode was started


@pytest.mark.slow
def test_under_nohup_sighup_leaves_the_run_going(pages: StaticServer, tmp_path: Path) -> None:
    """``nohup linewise …``: the person asked for the run to outlive the terminal."""
    with ScriptedChatServer(waiting_script, delay_s=0.3) as llm:
        process = start_run(llm, pages.url("form.html"), tmp_path, prefix=("nohup",))
        folder = wait_for_steps(tmp_path, 2)
        before = len((folder / "steps.jsonl").read_text().splitlines())
        os.killpg(process.pid, signal.SIGHUP)
        wait_for_steps(tmp_path, before + 3)  # it goes on
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 143, stderr
    assert "SIGHUP" not in stderr
    _, summary = read_trace(folder)
    assert summary["status"] == "stopped"


class Terminal:
    """A pseudo-terminal that is a command's controlling terminal, read as a terminal
    emulator reads it, until ``close`` closes it as a closed window does."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.shown = bytearray()
        self.closing = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while not self.closing.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    self.shown += os.read(self.master, 65536)
                except OSError:
                    return

    def close(self) -> None:
        self.closing.set()
        self.reader.join(timeout=5)
        os.close(self.master)


@pytest.mark.slow
def test_a_closed_terminal_stops_a_bench_resumably_with_its_report(
    pages: StaticServer, tmp_path: Path
) -> None:
    """Before: SIGHUP killed linewise outright (Python's default): the episode stayed
    "running", the bench had no report and its end was never recorded."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("tasks:\n" + "".join(
        f"  - {{id: wait-{n}, url: '{pages.url('form.html')}', goal: Wait, max_steps: 200}}\n"
        for n in range(3)
    ))
    out = tmp_path / "bench"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    terminal = Terminal()
    with ScriptedChatServer(waiting_script, delay_s=0.3) as llm:
        # a session of its own whose controlling terminal is the pseudo-terminal, as a
        # command typed into a terminal window (setsid --ctty: util-linux)
        process = subprocess.Popen(
            ["setsid", "--ctty", sys.executable, "-m", "linewise.cli.main", "bench",
             str(tasks), "--out", str(out), "--concurrency", "1", "--base-url",
             llm.base_url, "--model", "scripted", "--no-screenshots", "--repeat-escapes", "0"],
            stdin=terminal.slave, stdout=terminal.slave, stderr=terminal.slave, env=clean,
            preexec_fn=hangup_by_default)
        os.close(terminal.slave)
        try:
            folder = wait_for_steps(out, 2)
            children = children_of(process.pid)
            assert chromium_pids(process.pid), children
            terminal.close()  # the window is closed: the kernel hangs the terminal up
            code = process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert code == 129, bytes(terminal.shown)[-3000:].decode(errors="replace")
    steps, summary = read_trace(folder)
    assert summary["status"] == "stopped" and summary["termination"] == "interrupted"
    assert summary["n_steps"] == len(steps) >= 2
    assert all(s["failure"] is None for s in steps)
    assert still_running(children) == []
    # resumable: the stopped episode has no results line, no other one started, the
    # bench's end is recorded, and its report says what is left and how to go on
    results = out / "results.jsonl"
    assert not results.exists() or results.read_text().strip() == ""
    assert len(list(out.rglob("summary.json"))) == 1
    [invocation] = json.loads((out / "bench.json").read_text())["invocations"]
    assert invocation["ended"]["reason"] == "interrupted", invocation
    report = (out / "report.md").read_text()
    assert "Incomplete: 0 of 3 planned episodes ran, 3 left" in report, report[:2000]
    assert f"--out {out}" in report and "--resume" in report, report[:2000]
