"""A report says how much of its bench it covers: planned, ran and left, why the bench
stopped, and the command that carries on; a folder is never mixed with another plan.

Real ``linewise bench`` processes on MiniWoB++ (the scripted model behind real HTTP),
stopped the ways a bench stops: Ctrl+C, a model outage, SIGKILL. The HTML report is
rendered in headless Chromium.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from linewise.apps.bench.results import read_results
from linewise.runtime.browser.chromium import BrowserSession
from linewise.testing import ScriptedChatServer, miniwob_solver

CLICK_TEST = """\
defaults:
  max_steps: 3
tasks:
  - miniwob: click-test
    seed: 1
"""
ENTER_TEXT = CLICK_TEST.replace("click-test", "enter-text")
LINEWISE = [sys.executable, "-m", "linewise.cli.main"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    return env | extra


def _bench(tasks: Path, out: Path, base_url: str, *extra: str) -> list[str]:
    return [*LINEWISE, "bench", str(tasks), "--filter", "none", "--concurrency", "1",
            "--out", str(out), "--base-url", base_url, "--model", "scripted",
            "--no-screenshots", "--log-json", *extra]


def _lines(out: Path) -> int:
    path = out / "results.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _opening(markdown: str) -> list[str]:
    """The report's lines between its title and its notes."""
    body = markdown.split("\n", 2)[2]
    return [line for line in body.split("\n\n")[:4] if line.strip()]


@pytest.mark.slow
async def test_an_interrupted_bench_says_what_is_left_and_its_resume_command_finishes_it(
    tmp_path: Path, session: BrowserSession,
) -> None:
    """Before: the report of 2 of 6 episodes read "2 episodes … 100.0 ± 0.0"."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(CLICK_TEST)
    out = tmp_path / "bench"
    with ScriptedChatServer(miniwob_solver, delay_s=0.5) as llm:
        bench = subprocess.Popen(_bench(tasks, out, llm.base_url, "--seeds", "6"), env=_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while _lines(out) < 2:
            assert bench.poll() is None and time.monotonic() < deadline, "no episode ended"
            time.sleep(0.05)
        bench.send_signal(signal.SIGINT)  # the first Ctrl+C: stop after the running step
        stdout, stderr = bench.communicate(timeout=120)
        assert bench.returncode == 130, stderr[-3000:]
        ran = _lines(out)
        assert 2 <= ran < 6, stdout

        state = json.loads((out / "report.json").read_text())["state"]
        assert (state["planned"], state["ran"], state["left"]) == (6, ran, 6 - ran)
        assert state["stop"] == "interrupted"
        resume = shlex.split(state["resume"])
        assert resume[:3] == ["linewise", "bench", str(tasks)]
        assert "--resume" in resume and resume[resume.index("--out") + 1] == str(out)
        opening = _opening((out / "report.md").read_text())
        assert opening[0] == (f"**Incomplete: {ran} of 6 planned episodes ran, {6 - ran} "
                              "left (never started or cut short).**"), opening
        assert opening[1].startswith("Stopped at ") and ": interrupted (" in opening[1]
        assert opening[2] == f"Resume with: `{state['resume']}` (from {os.getcwd()})"

        page = session.page
        await page.goto((out / "report.html").as_uri())
        await page.screenshot(path=str(tmp_path / "interrupted.png"), full_page=True)
        assert await page.get_attribute("#state", "class") == "state incomplete"
        assert (await page.text_content("#state p") or "").startswith(
            f"Incomplete: {ran} of 6 planned episodes ran")
        assert await page.text_content("#state code.resume") == state["resume"]

        # the command the report gives runs exactly what was left
        finish = subprocess.run([*LINEWISE, *resume[1:]], cwd=state["resume_cwd"], env=_env(),
                                capture_output=True, text=True, timeout=240)
        assert finish.returncode == 0, finish.stderr[-3000:]
    results = read_results(out / "results.jsonl")
    assert len(results) == 6 and all(r.success for r in results)
    report = json.loads((out / "report.json").read_text())
    assert (report["state"]["left"], report["state"]["resume"]) == (0, None)
    assert _opening((out / "report.md").read_text())[0] == (
        "Complete: all 6 planned episodes ran.")
    await page.goto((out / "report.html").as_uri())
    assert await page.get_attribute("#state", "class") == "state complete"


@pytest.mark.slow
def test_a_bench_stopped_by_an_outage_says_why(tmp_path: Path) -> None:
    """Before: the report said nothing of the outage that stopped the bench."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(CLICK_TEST)
    out = tmp_path / "bench"
    server = ScriptedChatServer(miniwob_solver)
    count = 0
    lock = threading.Lock()

    def script(messages: list[dict[str, Any]]) -> str:
        nonlocal count
        with lock:
            count += 1
            if count == 3:  # the endpoint goes down for good after two episodes
                threading.Thread(target=server.down_for, args=(3600,), daemon=True).start()
        return miniwob_solver(messages)

    server.script = script
    env = _env(LINEWISE_OUTAGE__FAILURES_TO_PAUSE="1", LINEWISE_OUTAGE__PROBE_INITIAL_S="0.5",
               LINEWISE_OUTAGE__PROBE_MAX_S="1")
    with server:
        stopped = subprocess.run(
            _bench(tasks, out, server.base_url, "--seeds", "5", "--max-outage", "2",
                   "--retry-budget", "0"),
            env=env, capture_output=True, text=True, timeout=180)
    assert stopped.returncode == 4, stopped.stderr[-3000:]
    state = json.loads((out / "report.json").read_text())["state"]
    assert state["stop"] == "outage" and state["left"] > 0, state
    assert "down for longer than 2 s" in state["stop_detail"]
    opening = _opening((out / "report.md").read_text())
    assert opening[0].startswith(f"**Incomplete: {state['ran']} of 5 planned episodes ran")
    assert "the model endpoint stayed down (the model endpoint was down for longer than 2 s" \
        in opening[1], opening
    assert "--resume" in opening[2] and opening[2].startswith("Resume with: `linewise bench")


@pytest.mark.slow
def test_a_killed_bench_with_no_result_says_so_instead_of_an_empty_report(
    tmp_path: Path,
) -> None:
    """Before: a bench killed before its first result got a report of empty tables."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(CLICK_TEST)
    out = tmp_path / "bench"
    with ScriptedChatServer(miniwob_solver, delay_s=30) as llm:
        bench = subprocess.Popen(_bench(tasks, out, llm.base_url, "--seeds", "3"), env=_env(),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not llm.requests:  # the first episode waits on its model call
            assert bench.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        bench.send_signal(signal.SIGKILL)
        bench.wait(timeout=30)
    report = subprocess.run([*LINEWISE, "report", str(out)], env=_env(),
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr[-3000:]
    state = json.loads((out / "report.json").read_text())["state"]
    assert (state["planned"], state["ran"], state["left"], state["stop"]) == (3, 0, 3, "killed")
    markdown = (out / "report.md").read_text()
    opening = _opening(markdown)
    assert opening[0] == "**Incomplete: 0 of 3 planned episodes ran, 3 left (never started " \
                         "or cut short).**"
    assert "it was killed (SIGKILL, a power cut) or is still running" in opening[1]
    assert "No episode has a results line yet" in markdown
    assert "## Agents and filters" not in markdown


@pytest.mark.slow
def test_a_folder_rerun_with_another_task_file_is_refused(tmp_path: Path) -> None:
    """Before: the second file's episodes joined the first's in one report."""
    first, other = tmp_path / "first.yaml", tmp_path / "other.yaml"
    first.write_text(CLICK_TEST)
    other.write_text(ENTER_TEXT)
    out = tmp_path / "bench"
    with ScriptedChatServer(miniwob_solver) as llm:
        made = subprocess.run(_bench(first, out, llm.base_url), env=_env(),
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr[-3000:]
        before = (out / "results.jsonl").read_text()
        mixed = subprocess.run(_bench(other, out, llm.base_url), env=_env(),
                               capture_output=True, text=True, timeout=120)
        # the same plan again is a resume, not another bench
        again = subprocess.run(_bench(first, out, llm.base_url), env=_env(),
                               capture_output=True, text=True, timeout=120)
    assert mixed.returncode == 2, mixed.stderr[-3000:]
    assert (f"{out} holds another bench: 1 of the 1 episodes asked for are not in its plan "
            "of 1 (first: miniwob.enter-text.seed1 (seed 1, filter none)). Use another "
            f"--out, or continue that bench: linewise bench {first} ") in mixed.stderr, \
        mixed.stderr[-2000:]
    assert (out / "results.jsonl").read_text() == before
    assert again.returncode == 0 and "already done 1" in again.stdout, again.stderr[-2000:]


@pytest.mark.slow
def test_a_bench_from_before_plans_were_recorded_still_gets_its_state(tmp_path: Path) -> None:
    """A bench.json without plan, resume command or ends (linewise before them): the
    plan's size, what is left and a resume command come from what it has."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(CLICK_TEST)
    out = tmp_path / "bench"
    with ScriptedChatServer(miniwob_solver) as llm:
        made = subprocess.run(_bench(tasks, out, llm.base_url, "--seeds", "2"), env=_env(),
                              capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-3000:]
    # what such a folder holds after a kill: one line of two, bench.json of the old form
    results = out / "results.jsonl"
    results.write_text(results.read_text().splitlines(keepends=True)[0])
    manifest = json.loads((out / "bench.json").read_text())
    for key in ("planned", "resume"):
        del manifest[key]
    for invocation in manifest["invocations"]:
        del invocation["ended"]
    (out / "bench.json").write_text(json.dumps(manifest))
    report = subprocess.run([*LINEWISE, "report", str(out)], env=_env(),
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr[-3000:]
    state = json.loads((out / "report.json").read_text())["state"]
    assert (state["planned"], state["ran"], state["left"], state["stop"]) == (2, 1, 1, "unknown")
    assert state["resume"] == (f"linewise bench {tasks} --filter none --concurrency 1 --out "
                               f"{out} --base-url {llm.base_url} --model scripted "
                               "--no-screenshots --log-json --seeds 2 --resume")
    assert _opening((out / "report.md").read_text())[1] == (
        "Why the last run ended: not recorded (a bench from before linewise recorded why "
        "runs stopped).")
