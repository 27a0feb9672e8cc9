"""Ctrl+C on ``linewise run`` in a real subprocess: once stops after the step, twice at once.

Either way the process exits 130, every step line is complete JSON and the summary is
no longer ``running``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from linewise.testing import ScriptedChatServer, StaticServer


def waiting_script(messages: list[dict[str, Any]]) -> str:
    return "<think>Wait.</think><action>noop(200)</action>"


def start_run(llm: ScriptedChatServer, url: str, out: Path) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "linewise.cli.main", "run", "--url", url, "--goal", "Wait",
         "--max-steps", "200", "--base-url", llm.base_url, "--model", "scripted",
         "--out", str(out), "--no-screenshots", "--repeat-escapes", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean,
    )


def wait_for_steps(out: Path, count: int, timeout_s: float = 40) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        # An episode folder is made under a hidden ".<name>.starting" and renamed into
        # place: only a named folder is the trace.
        found = [p for p in out.rglob("steps.jsonl") if not p.parent.name.startswith(".")]
        try:
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
    assert summary["status"] != "running" and summary["termination"] == "interrupted", summary
    assert summary["finished_at"] is not None and summary["n_steps"] == len(steps)
    assert stopped_in < 10


@pytest.mark.slow
def test_one_ctrl_c_on_a_bench_leaves_the_stopped_episode_to_resume(
    pages: StaticServer, tmp_path: Path
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
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "--resume" in stdout
    steps, summary = read_trace(folder)
    assert summary["status"] == "stopped" and summary["n_steps"] == len(steps)
    results = out / "results.jsonl"
    assert not results.exists() or results.read_text().strip() == ""
    assert len(list(out.rglob("summary.json"))) == 1  # no other episode was started
