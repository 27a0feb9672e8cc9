"""Chaos: ``linewise bench`` as a user runs it, while its model endpoint and its Chromium
fail on a fixed schedule; after one ``--resume`` every episode has the agent's outcome.

The bench (a real subprocess, concurrency 1, 14 episodes: 12 MiniWoB++ tasks and two
local pages, one holding an iframe of ``file://`` that Chromium refuses, one an
``alert()`` every 30 ms from load on) talks to a ``ScriptedChatServer`` whose schedule
is keyed on the episode (its order in the bench) and on the try of each call, never on
the clock, so every fault lands on the same episode each run:

==========  ===========================================  =================================
episode     fault                                        ends as
==========  ===========================================  =================================
1           429 with ``Retry-After: 1``                  absorbed: retried after 1 s
2           429 without Retry-After, then a 500          absorbed: two retries, jittered
4           a stall of 5 s (the call timeout is 2 s)     absorbed: timed out and retried
5           a 200 whose body is not JSON                 infrastructure ``model``
6           Chromium SIGKILLed while the model answers   infrastructure ``browser``
8           the endpoint goes down for 10 s              infrastructure ``model`` (the
                                                         retry budget, 5 s, runs out),
                                                         then the bench pauses, probes
                                                         and carries on when it is back
3, 7        the refused iframe, the alert loop           agent outcomes (frame skipped,
                                                         dialogs dismissed)
==========  ===========================================  =================================

So the first bench reports exactly 3 infrastructure endings (model 2, browser 1; no
rerun within the bench, ``infra_retries`` 0, so that the report shows them) and exits
4; ``--resume`` runs those 3 again and every one of the 14 episodes then has an agent
outcome, once, and the command exits 0. Concurrency 1 keeps the counts exact: with
more episodes at once an outage or a killed Chromium ends every episode running at the
time, and how many those are depends on timing.

Wall time: 60 s for both commands on the 2-core machine at a moderate load, 150 s at
load average 26 (10 s of it the outage); the bound stated here is 3 min. The subprocess
deadlines below (4 min each) only catch a hang.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from linewise.apps.bench.results import read_results
from linewise.testing import Fault, ScriptedChatServer, StaticServer, prompt_section
from linewise.testing.bench_pages import GO_GOAL, go_then_report, write_pages
from linewise.testing.processes import chromium_pids

pytestmark = pytest.mark.slow  # two benches end to end through timed faults

MINIWOB = [("click-test", seed) if n % 2 == 0 else ("click-button", seed)
           for n, seed in enumerate([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])]
"""Twelve MiniWoB++ episodes the scripted solver wins with one click each."""

WEB_AT = {3: "refused-iframe", 7: "alert-loop"}
"""Episode number (from 1) -> the local page it runs on."""

INFRASTRUCTURE = {5: "model", 6: "browser", 8: "model"}
"""Episode number -> the infrastructure kind its fault ends it with."""


def task_file(tmp_path: Path, pages: StaticServer) -> tuple[Path, list[str]]:
    """The bench's tasks in run order, and their ids."""
    entries: list[str] = []
    ids: list[str] = []
    miniwob = iter(MINIWOB)
    for number in range(1, len(MINIWOB) + len(WEB_AT) + 1):
        if number in WEB_AT:
            name = WEB_AT[number]
            entries.append(f"  - id: {name}\n    url: {pages.url(name + '.html')}\n"
                           f"    goal: {GO_GOAL}\n"
                           "    success:\n      answer_contains: done\n")
            ids.append(name)
        else:
            task, seed = next(miniwob)
            entries.append(f"  - miniwob: {task}\n    seed: {seed}\n")
            ids.append(f"miniwob.{task}.seed{seed}")
    path = tmp_path / "tasks.yaml"
    path.write_text("defaults:\n  max_steps: 4\ntasks:\n" + "".join(entries))
    return path, ids


class ChaosSchedule:
    """Plays each fault on (episode, call of the episode, try of the call), all from 1.

    A chat request with the same messages as the one before is a retry of it; one whose
    history is empty starts the next episode (concurrency 1: episodes come one by one).
    """

    def __init__(self, server: ScriptedChatServer) -> None:
        self.server = server
        self.bench_pid: int | None = None
        self.killed: list[int] = []
        self.played: list[tuple[int, int, int]] = []
        self.episode = self.call = self.attempt = 0
        self._last: list[dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def plan(self) -> dict[tuple[int, int, int], Any]:
        return {
            (1, 1, 1): Fault.error(429, retry_after=1),
            (2, 1, 1): Fault.error(429),
            (2, 1, 2): Fault.error(500),
            (4, 1, 1): Fault.stall(5.0),
            (5, 1, 1): Fault.invalid_body(),
            (6, 1, 1): self.kill_chromium,
            (8, 1, 1): self.go_down,
        }

    def __call__(self, number: int, messages: list[dict[str, Any]]) -> Fault | None:
        with self._lock:
            if messages == self._last:
                self.attempt += 1
            else:
                history = prompt_section(messages[1]["content"], "History of your previous steps")
                if "first step" in history:
                    self.episode, self.call = self.episode + 1, 1
                else:
                    self.call += 1
                self.attempt = 1
            self._last = messages
            key = (self.episode, self.call, self.attempt)
        action = self.plan().get(key)
        if action is None:
            return None
        self.played.append(key)
        return action if isinstance(action, Fault) else action()

    def kill_chromium(self) -> None:
        """SIGKILL the bench's Chromium, then let the model answer: its action fails."""
        assert self.bench_pid is not None
        pid = chromium_pids(self.bench_pid)[-1]
        os.kill(pid, signal.SIGKILL)
        self.killed.append(pid)

    def go_down(self) -> None:
        """Down for 10 s from now: this request is dropped unanswered, and the port
        refuses connections until the server comes back up."""
        self.server.down_for(10.0)


def bench(tasks: Path, out: Path, base_url: str, schedule: ChaosSchedule,
          *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    env |= {
        "LINEWISE_OUTAGE__INFRA_RETRIES": "0",  # the report shows every ending (see above)
        "LINEWISE_OUTAGE__FAILURES_TO_PAUSE": "1",  # pause at the first endpoint ending
        "LINEWISE_OUTAGE__PROBE_INITIAL_S": "1",
        "LINEWISE_OUTAGE__PROBE_MAX_S": "2",
    }
    argv = [sys.executable, "-m", "linewise.cli.main", "bench", str(tasks),
            "--concurrency", "1", "--out", str(out), "--base-url", base_url,
            "--model", "scripted", "--no-screenshots", "--log-json",
            "--request-timeout", "2", "--retry-budget", "5", "--episode-timeout", "60",
            "--frame-timeout", "1000",
            # the iframe must reach Chromium's own refusal, not the navigation policy's
            "--no-navigation-policy", *extra]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as process:
        schedule.bench_pid = process.pid
        try:
            stdout, stderr = process.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            raise AssertionError(f"the bench hung:\n{stderr[-4000:]}") from None
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def result_lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_a_bench_under_chaos_ends_with_agent_outcomes_after_one_resume(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    write_pages(site)
    out = tmp_path / "bench"
    with StaticServer(site) as pages, ScriptedChatServer(go_then_report) as llm:
        schedule = ChaosSchedule(llm)
        llm.schedule = schedule
        tasks, ids = task_file(tmp_path, pages)
        first = bench(tasks, out, llm.base_url, schedule)
        after_first = result_lines(out)
        report_first = json.loads((out / "report.json").read_text())
        resumed = bench(tasks, out, llm.base_url, schedule, "--resume")

    # every fault was played where it was meant to be, Chromium was killed once
    assert sorted(schedule.played) == sorted(schedule.plan()), schedule.played
    assert len(schedule.killed) == 1
    # the first bench: the infrastructure endings are exactly the injected ones
    assert first.returncode == 4, first.stderr[-4000:]
    ended = {line["task_id"]: line for line in after_first}
    assert len(after_first) == len(ended) == len(ids)
    infra = {task: line["infra_kind"] for task, line in ended.items()
             if line["outcome"] == "infrastructure"}
    assert infra == {ids[n - 1]: kind for n, kind in INFRASTRUCTURE.items()}, infra
    assert all(line["outcome"] == "agent" and line["success"]
               for task, line in ended.items() if task not in infra), after_first
    assert "infrastructure endings 3 (" in first.stdout, first.stdout
    assert "model endpoint down since" in first.stderr
    assert "model endpoint answers again" in first.stderr
    [overall] = report_first["overall"]  # one agent, one filter
    assert overall["infrastructure"] == 3, overall
    assert overall["infra_kinds"] == {"model": 2, "browser": 1}, overall
    # the stalls of the two local pages were survived as the agent's episodes
    folders = {line["task_id"]: out / line["episode_dir"] for line in after_first}
    iframe_steps = read_steps(folders["refused-iframe"])
    assert iframe_steps and all(step["skipped_frames"] for step in iframe_steps)
    alert_steps = read_steps(folders["alert-loop"])
    assert any(step["dialogs"] for step in alert_steps)

    # one --resume: the three run again, and every episode has the agent's outcome once
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "(ran 3, recovered 0, already done 11)" in resumed.stdout, resumed.stdout
    assert "infrastructure endings 0" in resumed.stdout, resumed.stdout
    final = result_lines(out)
    assert sorted(line["task_id"] for line in final) == sorted(ids)
    results = read_results(out / "results.jsonl")
    assert all(r.outcome == "agent" and r.success for r in results), results
    [report] = json.loads((out / "report.json").read_text())["overall"]
    assert report["infrastructure"] == 0 and report["episodes"] == len(ids), report


def read_steps(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "steps.jsonl").read_text().splitlines()]
