"""A bench survives its model endpoint: an outage pauses it (probes, then carries on),
a too-long one stops it cleanly for ``--resume``, infrastructure endings run again
(``--resume``, ``--retry-errors``) and never count as the agent's, and the exit codes
say which is which. Real MiniWoB++ episodes; the scripted model behind real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from linewise.apps.bench.driver import run_bench
from linewise.apps.bench.local import BenchOptions
from linewise.apps.bench.plan import INFRA_DIR, expand
from linewise.apps.bench.results import read_results
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.tasks.schema import MiniWoBTask
from linewise.settings import EndpointSettings, LinewiseSettings, OutageSettings
from linewise.testing import ScriptedChatServer, ScriptedHTTPError, miniwob_solver
from tests.support.bench import RecordingProgress

pytestmark = pytest.mark.slow  # benches end to end through endpoint outages

FAST_RETRIES = {"retry_budget_s": 0.5, "backoff_initial_s": 0.05, "backoff_max_s": 0.2,
                "timeout_s": 5.0}


def _settings(base_url: str, **outage: Any) -> LinewiseSettings:
    endpoint = EndpointSettings(base_url=base_url, model="scripted", **FAST_RETRIES)
    knobs = {"failures_to_pause": 2, "probe_initial_s": 0.5, "probe_max_s": 2.0, **outage}
    return LinewiseSettings(action=endpoint, retriever=endpoint, screenshots=False,
                            outage=OutageSettings(**knobs))


def _raw_keys(out: Path) -> list[tuple[str, int, str]]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return [(r["task_id"], r["seed"], r["filter"]) for r in map(json.loads, lines)]


def _down_at_call(server: ScriptedChatServer, call: int, seconds: float) -> Any:
    """A script that takes the endpoint down for ``seconds`` when call ``call`` arrives."""
    count = 0
    lock = threading.Lock()

    def script(messages: list[dict[str, Any]]) -> str:
        nonlocal count
        with lock:
            count += 1
            if count == call:
                threading.Thread(target=server.down_for, args=(seconds,), daemon=True).start()
        return miniwob_solver(messages)

    return script


async def test_an_outage_pauses_the_bench_which_probes_and_carries_on(tmp_path: Path) -> None:
    specs = expand([MiniWoBTask(miniwob="click-test", seed=0, max_steps=3)], ["none"], 8)
    server = ScriptedChatServer(miniwob_solver)
    server.script = _down_at_call(server, call=3, seconds=6.0)
    progress = RecordingProgress()
    started = time.monotonic()
    with server:
        settings = _settings(server.base_url)
        outcome = await run_bench(specs, settings, BrowserConfig(), tmp_path,
                                  BenchOptions(concurrency=2), progress=progress, argv=["t"])
        resumed = 0
        if any(r.outcome != "agent" for r in outcome.results):  # at most one --resume
            outcome = await run_bench(specs, settings, BrowserConfig(), tmp_path,
                                      BenchOptions(concurrency=2), resume=True, argv=["t"])
            resumed = 1
    wall = time.monotonic() - started
    assert outcome.stopped is None
    # the bench paused: it said so, probed, and was told when the endpoint came back
    down = [n for n in progress.notices if n is not None]
    assert down and "model endpoint down since" in down[0].text()
    assert progress.notices[-1] is None
    assert progress.retried and all(r.infra_kind == "model" for r in progress.retried)
    # every episode ended with an agent outcome, once
    results = read_results(tmp_path / "results.jsonl")
    assert len(results) == 8 and all(r.outcome == "agent" and r.success for r in results)
    keys = _raw_keys(tmp_path)
    assert len(keys) == len(set(keys)) == 8
    # the failed tries are kept aside, not mixed into the bench
    assert any((tmp_path / INFRA_DIR / "none").iterdir())
    # about 20 s idle; the bound only catches a hang (a loaded CI machine is 3x slower)
    assert resumed <= 1 and wall < 180


async def test_a_too_long_outage_stops_cleanly_and_resume_finishes(tmp_path: Path) -> None:
    specs = expand([MiniWoBTask(miniwob="click-test", seed=0, max_steps=3)], ["none"], 6)
    server = ScriptedChatServer(miniwob_solver)
    server.script = _down_at_call(server, call=3, seconds=3600)
    with server:
        settings = _settings(server.base_url, max_outage_s=2.0)
        started = time.monotonic()
        stopped = await run_bench(specs, settings, BrowserConfig(), tmp_path,
                                  BenchOptions(concurrency=2), argv=["t"])
        assert time.monotonic() - started < 120  # catches a hang, not a slow machine
        assert stopped.stopped is not None and "down for longer than 2 s" in stopped.stopped
        assert 2 <= len(stopped.results) < 6
        server.come_up()
        resumed = await run_bench(specs, settings, BrowserConfig(), tmp_path,
                                  BenchOptions(concurrency=2), resume=True, argv=["t"])
    assert resumed.stopped is None
    results = read_results(tmp_path / "results.jsonl")
    assert len(results) == 6 and all(r.outcome == "agent" and r.success for r in results)
    assert len(_raw_keys(tmp_path)) == 6



async def test_an_endpoint_that_answers_probes_but_fails_every_chat_still_runs_out(
    tmp_path: Path,
) -> None:
    """The model list answers (so every probe lifts the pause) while each chat gets a
    503: the outage lasts until an episode is served, so the bench stops on time."""
    specs = expand([MiniWoBTask(miniwob="click-test", seed=0, max_steps=3)], ["none"], 8)

    def overloaded(_messages: list[dict[str, Any]]) -> str:
        raise ScriptedHTTPError(503, "overloaded")

    with ScriptedChatServer(overloaded) as server:
        settings = _settings(server.base_url, max_outage_s=3.0)
        started = time.monotonic()
        stopped = await run_bench(specs, settings, BrowserConfig(), tmp_path,
                                  BenchOptions(concurrency=1), argv=["t"])
        assert time.monotonic() - started < 120  # catches a bench that never gives up
    assert stopped.stopped is not None and "down for longer than 3 s" in stopped.stopped
    assert len(stopped.results) < 8

# ------------------------------------------------------------------ the command, exit codes

TASKS_YAML = """\
defaults:
  max_steps: 3
tasks:
  - miniwob: click-test
    seed: 1
  - miniwob: click-button
    seed: 2
"""


def _bench(tmp_path: Path, base_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS_YAML)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    # no in-bench rerun and no pause: the infrastructure endings stay for --retry-errors
    env |= {"LINEWISE_OUTAGE__INFRA_RETRIES": "0", "LINEWISE_OUTAGE__FAILURES_TO_PAUSE": "99"}
    return subprocess.run(
        [sys.executable, "-m", "linewise.cli.main", "bench", str(tasks), "--seeds", "2",
         "--concurrency", "2", "--out", str(tmp_path / "bench"), "--base-url", base_url,
         "--model", "scripted", "--no-screenshots", "--log-json", "--retry-budget", "0",
         *extra],
        capture_output=True, text=True, timeout=180, env=env,
    )


def test_retry_errors_reruns_the_infrastructure_endings_of_a_finished_bench(
    tmp_path: Path,
) -> None:
    failing = threading.Event()
    failing.set()

    def script(messages: list[dict[str, Any]]) -> str:
        if failing.is_set() and "Click on the" in messages[1]["content"]:
            raise RuntimeError("overloaded")  # a 500 for every click-button call
        return miniwob_solver(messages)

    out = tmp_path / "bench"
    with ScriptedChatServer(script) as server:
        first = _bench(tmp_path, server.base_url)
        assert first.returncode == 4, first.stderr[-3000:]
        assert "infrastructure endings 2 (model 2)" in first.stdout, first.stdout
        report = (out / "report.md").read_text()
        assert "| scripted | auto | 4 | 2 | 100.0 ± 0.0 (n=2) | 2 (model 2) |" in report
        failing.clear()
        second = _bench(tmp_path, server.base_url, "--retry-errors")
    assert second.returncode == 0, second.stderr[-3000:]
    results = read_results(out / "results.jsonl")
    assert len(results) == 4 and all(r.outcome == "agent" and r.success for r in results)
    assert len(_raw_keys(out)) == 4
    assert "(ran 2, recovered 0, already done 2)" in second.stdout, second.stdout
    taken_back = (out / INFRA_DIR / "results.jsonl").read_text().splitlines()
    assert Counter(json.loads(line)["infra_kind"] for line in taken_back) == {"model": 2}


def test_bench_stops_at_once_with_exit_3_when_the_key_is_refused(tmp_path: Path) -> None:
    def script(messages: list[dict[str, Any]]) -> str:
        raise ScriptedHTTPError(401, "invalid api key")

    with ScriptedChatServer(script) as server:
        refused = _bench(tmp_path, server.base_url)
        assert len(server.requests) <= 2  # the two first episodes, nothing after
    assert refused.returncode == 3, refused.stderr[-3000:]
    assert f"LLM endpoint {server.base_url} refused the API key (401)" in refused.stderr
    assert read_results(tmp_path / "bench" / "results.jsonl") == []


def test_resume_reruns_endpoint_failures_recorded_before_endings_were_classified(
    tmp_path: Path,
) -> None:
    """The lines an older bench wrote for an endpoint outage (``error_kind: model``, no
    outcome) were skipped by --resume forever; now they are taken back and rerun."""
    from linewise.apps.bench.driver import take_back_endings

    specs = expand([MiniWoBTask(miniwob="click-test", seed=0)], ["none"], 3)
    ok, outage, wrong = specs
    base = {"base_task": "miniwob.click-test", "benchmark": "miniwob", "filter": "none",
            "agent": "m"}
    lines = [
        {**base, "task_id": ok.task.id, "seed": ok.seed, "success": True,
         "termination": "task_done"},
        {**base, "task_id": outage.task.id, "seed": outage.seed, "success": False,
         "termination": "error", "error": "EndpointUnreachable: down", "error_kind": "model"},
        {**base, "task_id": wrong.task.id, "seed": wrong.seed, "success": False,
         "termination": "max_steps"},
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    outage.folder(tmp_path).mkdir(parents=True)
    assert take_back_endings(tmp_path, specs) == 1
    assert [r.key for r in read_results(tmp_path / "results.jsonl")] == [ok.key, wrong.key]
    assert not outage.folder(tmp_path).exists()
    assert len(list((tmp_path / INFRA_DIR / "none").iterdir())) == 1
    kept = json.loads((tmp_path / INFRA_DIR / "results.jsonl").read_text())
    assert kept["outcome"] == "infrastructure" and kept["infra_kind"] == "model"
    assert take_back_endings(tmp_path, specs) == 0  # agent outcomes stand
