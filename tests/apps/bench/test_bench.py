"""``linewise bench``: real episodes on MiniWoB++, a scripted model behind real HTTP.

The resume test kills a real ``linewise bench`` process with SIGKILL while episodes run
and checks that a second run completes the bench with every episode exactly once.
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

from linewise.apps.bench.driver import run_bench
from linewise.apps.bench.local import BenchOptions
from linewise.apps.bench.plan import INCOMPLETE_DIR, EpisodeKey, expand
from linewise.apps.bench.results import (
    SUMMARY_ONLY,
    EpisodeResult,
    ResultsWriter,
    read_results,
    result_from_summary,
    summary_values,
)
from linewise.errors import ConfigError, ModelError
from linewise.records import EpisodeSummary, TimeTotals, TokenTotals
from linewise.runtime import run as run_module
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.tasks.loader import load_task_file
from linewise.runtime.tasks.schema import BrowserGymTask, MiniWoBTask, WebTask
from linewise.settings import EndpointSettings, LinewiseSettings, OutageSettings
from linewise.testing import (
    ScriptedChatServer,
    ScriptedHTTPError,
    StaticServer,
    miniwob_solver,
    prompt_section,
)
from linewise.testing.bench_pages import GO_GOAL, go_then_report, write_pages

TASKS_YAML = """\
defaults:
  max_steps: 3
tasks:
  - miniwob: click-test
    seed: 1
  - miniwob: click-button
    seed: 2
  - miniwob: enter-text
    seed: 0
"""


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}


def _bench_command(tasks: Path, out: Path, base_url: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "linewise.cli.main", "bench", str(tasks),
        "--filter", "none", "--filter", "truncate", "--seeds", "2", "--concurrency", "3",
        "--out", str(out), "--base-url", base_url, "--model", "scripted",
        "--no-screenshots", "--log-json", *extra,
    ]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
def test_bench_killed_then_resumed_runs_every_episode_exactly_once(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS_YAML)
    out = tmp_path / "bench"
    results = out / "results.jsonl"
    expected = {
        (f"miniwob.{name}.seed{seed + i}", seed + i, f)
        for name, seed in (("click-test", 1), ("click-button", 2), ("enter-text", 0))
        for i in range(2) for f in ("none", "truncate")
    }
    with ScriptedChatServer(miniwob_solver, delay_s=0.3) as llm:
        first = subprocess.Popen(
            _bench_command(tasks, out, llm.base_url), env=_clean_env(),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_lines(results)) < 3:
            assert first.poll() is None, "the bench ended before it could be killed"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        done_at_kill = {EpisodeKey(*k) for k in
                        ((r.task_id, r.seed, r.filter) for r in read_results(results))}
        assert 3 <= len(done_at_kill) < len(expected), "kill did not land mid-bench"
        requests_before = len(llm.requests)
        llm.delay_s = 0.0  # the delay only made the kill land mid-bench

        second = subprocess.run(
            _bench_command(tasks, out, llm.base_url, "--resume"), env=_clean_env(),
            capture_output=True, text=True, timeout=240,
        )
        assert second.returncode == 0, second.stderr[-3000:]

    lines = [json.loads(line) for line in _lines(results)]
    keys = [(r["task_id"], r["seed"], r["filter"]) for r in lines]
    assert sorted(keys) == sorted(expected), "every episode exactly once"
    assert all(r["success"] for r in lines), [r for r in lines if not r["success"]]
    # nothing repeated: the second run ran (or recovered) only what the first had not done
    assert f"already done {len(done_at_kill)})" in second.stdout, second.stdout
    assert len(llm.requests) - requests_before <= 2 * (len(expected) - len(done_at_kill))
    # every recorded episode has its own complete trace, in its deterministic folder
    for r in lines:
        summary = json.loads((out / r["episode_dir"] / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["task_id"] == r["task_id"]
    for leftover in (out / INCOMPLETE_DIR).glob("*/*"):
        assert json.loads((leftover / "summary.json").read_text())["status"] == "running"
    # the report counts what results.jsonl holds
    report = json.loads((out / "report.json").read_text())
    assert report["episodes"] == len(expected)
    assert {g["label"]["filter"]: g["episodes"] for g in report["overall"]} == {
        "none": 6, "truncate": 6}
    assert sum(g["episodes"] for g in report["by_task"]) == len(expected)
    assert "| scripted | none | 6 | 6 | 100.0 ± 0.0 (n=6) |" in (out / "report.md").read_text()


def _settings(base_url: str) -> LinewiseSettings:
    endpoint = EndpointSettings(base_url=base_url, model="scripted")
    return LinewiseSettings(action=endpoint, retriever=endpoint, screenshots=False)


@pytest.mark.slow
async def test_a_raising_a_hanging_and_a_refused_episode_do_not_stop_the_bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """click-test crashes (a bug), click-button hangs past its timeout, focus-text's
    model call is refused; enter-text still runs, and all four are recorded."""

    def script(messages: list[dict[str, Any]]) -> str:
        prompt = messages[1]["content"]
        if "Click on the" in prompt:
            time.sleep(16)  # past the 10 s episode timeout
        if "Focus into the textbox" in prompt:
            raise ScriptedHTTPError(400, "model refuses")
        return miniwob_solver(messages)

    original = run_module.run_in_environment

    async def flaky(env: Any, task_id: str, *args: Any, **kwargs: Any) -> Any:
        if task_id.startswith("miniwob.click-test"):
            raise RuntimeError("a bug in one episode")
        return await original(env, task_id, *args, **kwargs)

    monkeypatch.setattr(run_module, "run_in_environment", flaky)
    tasks = [MiniWoBTask(miniwob=name, seed=seed, max_steps=3) for name, seed in
             (("click-test", 1), ("click-button", 2), ("focus-text", 3), ("enter-text", 0))]
    specs = expand(tasks, ["none"], 1)
    with ScriptedChatServer(script) as llm:
        outcome = await run_bench(
            specs, _settings(llm.base_url), BrowserConfig(), tmp_path,
            BenchOptions(concurrency=2, episode_timeout_s=10.0), argv=["test"],
        )
    by_task = {r.task_id: r for r in outcome.results}
    assert len(by_task) == 4 and outcome.ran == 4
    crash = by_task["miniwob.click-test.seed1"]
    assert crash.error_kind == "crash" and "a bug in one episode" in (crash.error or "")
    hang = by_task["miniwob.click-button.seed2"]
    assert hang.error_kind == "timeout" and hang.termination == "timeout"
    assert hang.wall_s < 15
    refused = by_task["miniwob.focus-text.seed3"]
    assert refused.error_kind == "model" and "400" in (refused.error or "")
    assert by_task["miniwob.enter-text.seed0"].success is True
    assert len(read_results(tmp_path / "results.jsonl")) == 4


async def test_rerun_into_the_same_folder_runs_nothing_again(tmp_path: Path) -> None:
    specs = expand([MiniWoBTask(miniwob="click-test", seed=1, max_steps=2)], ["none"], 1)
    with ScriptedChatServer(miniwob_solver) as llm:
        settings = _settings(llm.base_url)
        first = await run_bench(specs, settings, BrowserConfig(), tmp_path, BenchOptions(),
                                argv=["test"])
        calls = len(llm.requests)
        second = await run_bench(specs, settings, BrowserConfig(), tmp_path, BenchOptions(),
                                 argv=["test"])
        assert len(llm.requests) == calls
    assert first.ran == 1 and second.ran == 0 and second.skipped == 1
    assert len(second.results) == 1


# ---------------------------------------------------------------- plan and results files


def test_seeds_expand_miniwob_ids_and_repeat_web_tasks() -> None:
    tasks = [
        MiniWoBTask(miniwob="click-test", seed=3),
        MiniWoBTask(id="custom", miniwob="click-button", seed=0),
        WebTask(id="docs", url="https://example.org", goal="x"),
        BrowserGymTask(browsergym="miniwob.click-test", seed=5),
    ]
    specs = expand(tasks, ["none", "lines+structure"], 2)
    assert len(specs) == 16
    ids = [(s.task.id, s.seed, s.base_task) for s in specs if s.filter == "none"]
    assert ids == [
        ("miniwob.click-test.seed3", 3, "miniwob.click-test"),
        ("custom.seed0", 0, "custom"),
        ("docs.seed0", 0, "docs"),
        ("browsergym.miniwob.click-test.seed5", 5, "browsergym.miniwob.click-test"),
        ("miniwob.click-test.seed4", 4, "miniwob.click-test"),
        ("custom.seed1", 1, "custom"),
        ("docs.seed1", 1, "docs"),
        ("browsergym.miniwob.click-test.seed6", 6, "browsergym.miniwob.click-test"),
    ]
    assert specs[1].filter == "lines+structure"
    assert specs[1].folder(Path("/b")) == Path("/b/lines_structure/miniwob.click-test.seed3")
    # one seed: ids as the file gives them
    assert [s.task.id for s in expand(tasks[2:3], ["none"], 1)] == ["docs"]


def _result(task_id: str, **extra: Any) -> EpisodeResult:
    fields: dict[str, Any] = {"success": True, **extra}
    return EpisodeResult(task_id=task_id, base_task=task_id, benchmark="miniwob", seed=0,
                         filter="none", agent="m", **fields)


def test_results_file_survives_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsWriter(path) as writer:
        writer.append(_result("a"))
        writer.append(_result("b"))
    with path.open("a") as handle:
        handle.write(_result("c").model_dump_json()[:40])  # a kill mid-write
    assert [r.task_id for r in read_results(path)] == ["a", "b"]
    with ResultsWriter(path) as writer:  # cuts the torn tail before appending
        writer.append(_result("c"))
    assert [r.task_id for r in read_results(path)] == ["a", "b", "c"]
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_duplicate_lines_count_once(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsWriter(path) as writer:
        writer.append(_result("a", reward=1.0))
        writer.append(_result("a", reward=0.0))
    [only] = read_results(path)
    assert only.reward == 1.0


class _FailsToStart:
    """An environment whose reset raises ``exc``: a fault inside the episode."""

    def __init__(self, env: Any, exc: Exception) -> None:
        self._env, self._exc = env, exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    async def reset(self) -> Any:
        raise self._exc


@pytest.mark.slow
async def test_error_kind_of_each_infrastructure_ending_comes_from_its_infra_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each infrastructure kind an episode of a bench can end on, through a real bench
    run: the table's error kind is the one of the episode's ``infra_kind`` (the refused
    key stops the whole bench and writes no line: test_bench_outage covers it)."""
    pages = tmp_path / "pages"
    write_pages(pages)
    raised = {"task": ConfigError("a secret is not set"), "server": ModelError("no model"),
              "crash": RuntimeError("a bug")}

    def script(messages: list[dict[str, Any]]) -> str:
        goal = prompt_section(messages[1]["content"], "Goal")
        if "[model]" in goal:
            raise ScriptedHTTPError(400, "malformed request")
        if "[config]" in goal:
            raise ScriptedHTTPError(400, "This model's maximum context length is 8192 tokens")
        return go_then_report(messages)

    original = run_module.environment_for

    def environment_for(task: WebTask, *args: Any, **kwargs: Any) -> Any:
        env = original(task, *args, **kwargs)
        return _FailsToStart(env, raised[task.id]) if task.id in raised else env

    monkeypatch.setattr(run_module, "environment_for", environment_for)
    with StaticServer(pages) as site, ScriptedChatServer(script) as llm:
        tasks = [WebTask(id=kind, url=site.url("plain.html"), goal=f"{GO_GOAL} [{kind}]",
                         max_steps=2) for kind in ("agent", "model", "config", *raised)]
        tasks.append(WebTask(id="browser", url="http://127.0.0.1:9/", goal=GO_GOAL))
        settings = _settings(llm.base_url).model_copy(
            update={"outage": OutageSettings(failures_to_pause=50, infra_retries=0)})
        outcome = await run_bench(expand(tasks, ["none"], 1), settings, BrowserConfig(),
                                  tmp_path / "bench", BenchOptions(concurrency=2),
                                  argv=["test"])
    ended = {r.task_id: (r.infra_kind, r.error_kind) for r in outcome.results}
    assert ended == {
        "agent": (None, None), "model": ("model", "model"), "config": ("config", "model"),
        "task": ("task", "task"), "server": ("server", "model"), "crash": ("crash", "crash"),
        "browser": ("browser", "page"),
    }, outcome.results


def test_every_summary_value_is_carried_into_the_results_line_or_listed_as_left_out() -> None:
    """A field added to EpisodeSummary (or its token and time totals) is either a field
    of EpisodeResult of the same name, and so copied by result_from_summary, or listed
    in SUMMARY_ONLY: it cannot be forgotten on the way."""
    summary = EpisodeSummary(episode_id="e", task_id="t", action_model="m",
                             termination="max_steps", n_steps=3, obs_tokens_full=7,
                             tokens=TokenTotals(action_prompt=11, retriever_completion=5,
                                                llm_calls=2),
                             time=TimeTotals(wall_s=1.5, llm_s=0.5), repeats_kept=1)
    values = summary_values(summary)
    assert set(values) - set(EpisodeResult.model_fields) <= SUMMARY_ONLY
    assert not SUMMARY_ONLY & set(EpisodeResult.model_fields) - {"finished_at"}
    spec = expand([WebTask(id="t", url="https://example.org", goal="g", max_steps=4)],
                  ["none"], 1)[0]
    result = result_from_summary(spec, summary, [], backend="local")
    dumped = result.model_dump()
    carried = {name: value for name, value in values.items() if name in dumped
               and name not in SUMMARY_ONLY}
    assert carried and all(dumped[name] == value for name, value in carried.items())
    assert (result.agent, result.action_prompt_tokens, result.retriever_completion_tokens,
            result.llm_calls, result.wall_s, result.outcome, result.max_steps) == (
        "m", 11, 5, 2, 1.5, "agent", 4)


def test_task_file_with_browsergym_entries(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "defaults:\n  max_steps: 4\ntasks:\n  - miniwob: click-test\n    seed: 1\n"
        "  - browsergym: browsergym/miniwob.click-button\n    seed: 2\n"
    )
    first, second = load_task_file(path)
    assert isinstance(first, MiniWoBTask) and first.max_steps == 4
    assert isinstance(second, BrowserGymTask) and second.env_id == (
        "browsergym/miniwob.click-button")
    assert second.id == "browsergym.miniwob.click-button.seed2" and second.max_steps == 4


@pytest.mark.slow
def test_bench_usage_errors(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS_YAML)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "linewise.cli.main", *args],
                              capture_output=True, text=True, timeout=60, env=_clean_env())

    result = run("bench", str(tasks), "--resume", "--out", str(tmp_path / "nothing"),
                 "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert result.returncode == 2 and "holds no bench" in result.stderr
    result = run("bench", str(tasks), "--seeds", "0")
    assert result.returncode == 2 and "--seeds" in result.stderr
    result = run("report", str(tmp_path))
    assert result.returncode == 2 and "results.jsonl" in result.stderr


def test_progress_bar_and_log_lines_count_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    from linewise.apps.bench.progress import LogProgress, RichProgress

    results = [_result("a"), _result("b", success=False, termination="max_steps"),
               _result("c", action_prompt_tokens=100),
               _result("d", success=False, error="x", error_kind="model")]
    for progress in (RichProgress(), LogProgress()):
        progress.start(total=5, already_done=1)
        for r in results:
            progress.episode_started(r.task_id)
        for r in results:
            progress.episode_finished(r)
        counts = progress.counts  # type: ignore[attr-defined]
        progress.close()
        assert (counts.done, counts.running, counts.failed, counts.tokens) == (4, 0, 1, 100)
        # the endpoint fault is counted beside the rate, not in it
        assert counts.infra == 1 and counts.rate_text() == "67%"
        assert counts.eta_s is not None and counts.eta_s >= 0


def test_reconcile_recovers_ended_episodes_and_sets_aside_unfinished_ones(
    tmp_path: Path,
) -> None:
    """Killed between summary.json and results.jsonl: the episode is read back, not rerun.
    Killed mid-episode: its folder moves to _incomplete/ and the episode runs again."""
    from linewise.apps.bench.driver import reconcile
    from linewise.records import EpisodeSummary
    from linewise.runtime.trace import EpisodeTraceWriter

    tasks = [MiniWoBTask(miniwob=name, seed=0) for name in
             ("click-test", "click-button", "enter-text", "focus-text")]
    done, ended, running, untouched = expand(tasks, ["none"], 1)
    with ResultsWriter(tmp_path / "results.jsonl") as writer:
        writer.append(_result(done.task.id))
    for spec, status in ((ended, "finished"), (running, "running")):
        summary = EpisodeSummary(episode_id="e", task_id=spec.task.id, status=status,
                                 success=status == "finished", n_steps=1)
        EpisodeTraceWriter(spec.folder(tmp_path)).start(summary)
    with ResultsWriter(tmp_path / "results.jsonl") as writer:
        pending, skipped, recovered, moved = reconcile(
            tmp_path, [done, ended, running, untouched], writer, "local")
    assert [s.key for s in pending] == [running.key, untouched.key]
    assert (skipped, recovered) == (1, 1)
    assert not running.folder(tmp_path).exists()
    [aside] = moved
    assert aside.parent == tmp_path / INCOMPLETE_DIR / "none"
    assert (aside / "summary.json").exists()
    lines = read_results(tmp_path / "results.jsonl")
    assert [(r.task_id, r.recovered) for r in lines] == [
        (done.task.id, False), (ended.task.id, True)]
