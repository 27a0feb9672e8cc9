"""``linewise prune``, ``memory build`` and ``improve`` as a person runs them: a real
process on real trace folders, with a scripted model behind real HTTP. What they print
while they work, what they say at the end, their exit codes, and what they refuse."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from linewise.cli.exit_codes import EXIT_NOTHING_BUILT
from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.trace import EpisodeTraceWriter
from linewise.testing import ScriptedChatServer, miniwob_solver
from tests.support.cli import linewise
from tests.support.terminal import linewise_in_pane, needs_terminal


def clean_env() -> dict[str, str]:
    """The environment of ``tests.support.cli.linewise``: no endpoint or setting of the
    machine's."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}

MINIWOB_TASKS = "tasks:\n  - {miniwob: click-test, seed: 0, max_steps: 2}\n"


@pytest.mark.parametrize(("flag", "seeds", "why"), [
    ("--train-seeds", "3-1", "seeds '3-1': the first is after the last"),
    ("--test-seeds", "x", "seeds must be A-B or A (A <= B, not negative), got 'x'"),
])
def test_improve_names_a_bad_seed_range(flag: str, seeds: str, why: str,
                                        tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(MINIWOB_TASKS)
    ranges = {"--train-seeds": "0-1", "--test-seeds": "5-6", flag: seeds}
    result = linewise("improve", str(tasks), *(w for pair in ranges.items() for w in pair),
                      "--out", str(tmp_path / "improve"), timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == f"linewise improve: error: argument {flag}: {why}"
    assert "Traceback" not in result.stderr and not (tmp_path / "improve").exists()


# ---------------------------------------------------------------- trace folders


def write_episode(run: Path, name: str, steps: int, *, success: bool = True) -> Path:
    """An episode folder as a run writes it: ``steps`` clicks on a page, the last one
    ending the task."""
    folder = run / name
    writer = EpisodeTraceWriter(folder)
    summary = EpisodeSummary(episode_id=f"ep-{name}", task_id=f"task-{name}",
                             goal=f"Press the buttons of {name}.", start_url="http://a.test/")
    writer.start(summary)
    for index in range(steps):
        page = f"[1] RootWebArea '{name}'\n  [{index + 2}] button 'Step {index}'"
        writer.write_step(StepRecord(
            episode_id=summary.episode_id, task_id=summary.task_id, index=index,
            url="http://a.test/", axtree=page, observation=page,
            think=f"Press step {index}.", action=f"click('{index + 2}')",
            done=index == steps - 1, reward=1.0 if success and index == steps - 1 else 0.0))
    summary.status, summary.success, summary.n_steps = "finished", success, steps
    summary.termination = "agent_done"
    writer.write_summary(summary)
    return folder


def events(stderr: str, name: str) -> list[dict[str, Any]]:
    """The JSON log lines named ``name`` (stderr is not a terminal: JSON lines)."""
    found = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == name:
                found.append(record)
    return found


def unanswerable(messages: list[dict[str, Any]]) -> str:
    """An extractor that never answers with a graph: every build fails."""
    return "I am not sure what you want."


# ---------------------------------------------------------------- prune


@pytest.mark.slow
def test_prune_shows_each_verdict_as_it_comes_and_names_the_failures(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_episode(run, "a-one-step", 1)  # kept whole, no model asked
    write_episode(run, "b-two-steps", 2)  # its graph cannot be built
    write_episode(run, "c-lost", 2, success=False)  # left out before pruning
    out = tmp_path / "dataset"
    # A slow model: the first verdict must show while the second is still being built.
    with ScriptedChatServer(unanswerable, delay_s=0.3) as llm:
        process = subprocess.Popen(
            [sys.executable, "-m", "linewise.cli.main", "prune", str(run), "--out", str(out),
             "--base-url", llm.base_url, "--model", "scripted", "--concurrency", "1",
             "--build-retries", "0", "--repeats", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
        assert process.stderr is not None
        first_seen_while_running = None
        lines = []
        for line in process.stderr:
            lines.append(line)
            if first_seen_while_running is None and '"prune progress"' in line:
                first_seen_while_running = process.poll() is None
        stdout = process.stdout.read() if process.stdout else ""
        code = process.wait(timeout=120)
    stderr = "".join(lines)
    assert code == 0, stderr[-3000:]
    assert first_seen_while_running is True
    progress = events(stderr, "prune progress")
    assert [(p["done"], p["total"], p["ended"]) for p in progress] == [
        (1, 2, "unpruned"), (2, 2, "build_failed")]
    assert progress[-1]["counts"] == {"unpruned": 1, "build_failed": 1}
    assert all(isinstance(p["eta_s"], int) and p["unit"] == "trajectories" for p in progress)
    assert stdout.splitlines()[:2] == [
        "episodes 3: 1 left out before pruning, 2 to prune",
        "trajectories 2: 0 pruned, 1 with nothing to prune, 0 discarded (the runs "
        "disagreed), 1 failed (no graph could be built)"]
    assert f"why, for each: {out / 'trajectories.jsonl'}" in stdout
    stats = json.loads((out / "stats.json").read_text())
    assert (stats["build_failed"], stats["unpruned"]) == (1, 1)


@pytest.mark.slow
def test_prune_fails_when_nothing_could_be_built(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_episode(run, "two-steps", 2)
    write_episode(run, "three-steps", 3)
    out = tmp_path / "dataset"
    with ScriptedChatServer(unanswerable) as llm:
        result = linewise("prune", str(run), "--out", str(out), "--base-url", llm.base_url,
                          "--model", "scripted", "--build-retries", "0", timeout=120)
    assert result.returncode == EXIT_NOTHING_BUILT == 7
    assert "0 pruned, 0 with nothing to prune, 0 discarded (the runs disagreed), 2 failed " \
        "(no graph could be built)" in result.stdout
    assert result.stderr.splitlines()[-1] == (
        f"linewise: error: nothing to train on in {out}: no trajectory of 2 was kept "
        "(2 failed to build)")
    assert [p["counts"] for p in events(result.stderr, "prune progress")][-1] == {
        "build_failed": 2}
    # what was tried is on disk, to see why
    verdicts = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert [v["status"] for v in verdicts] == ["build_failed", "build_failed"]


@pytest.mark.slow
@needs_terminal
def test_prune_on_a_terminal_shows_a_bar_with_the_counts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_episode(run, "a-one-step", 1)
    write_episode(run, "b-two-steps", 2)
    out = tmp_path / "dataset"
    with ScriptedChatServer(unanswerable, delay_s=1.0) as llm, linewise_in_pane(
        ["prune", str(run), "--out", str(out), "--base-url", llm.base_url, "--model",
         "scripted", "--concurrency", "1", "--build-retries", "0", "--repeats", "1"],
        tmp_path, None,
    ) as pane:
        text = pane.wait_for(r"1/2 trajectories", timeout_s=60)
        assert re.search(r"^prune +[━╺╸]+ +1/2 trajectories +unpruned 1 +\d:\d\d:\d\d elapsed +"
                         r"ETA \d:\d\d:\d\d$", text, re.MULTILINE), text
        code = pane.wait_exit(timeout_s=60)
        text = pane.text()
    assert code == 0, text
    assert "trajectories 2: 0 pruned, 1 with nothing to prune, 0 discarded (the runs " \
        "disagreed), 1 failed (no graph could be built)" in " ".join(text.split())
    # under the bar only warnings are logged (--log-level auto): the bar says the rest
    assert "[warning" in text and "[info" not in text


# ---------------------------------------------------------------- not a run


def not_runs(tmp_path: Path) -> list[Path]:
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "photos"
    (other / "2024").mkdir(parents=True)
    (other / "2024" / "summary.json").write_text("{}")  # no steps.jsonl: not an episode
    (other / "notes.txt").write_text("not a run")
    return [empty, other]


@pytest.mark.slow
@pytest.mark.parametrize("command", [["prune"], ["memory", "build", "--no-embed"]])
def test_a_folder_that_is_not_a_run_is_refused_and_nothing_written(
    command: list[str], tmp_path: Path,
) -> None:
    good = tmp_path / "run"
    write_episode(good, "one", 1)
    out = tmp_path / ("dataset" if command == ["prune"] else "memory.jsonl")
    for folder in not_runs(tmp_path):
        result = linewise(*command, str(good), str(folder), "--out", str(out), timeout=60)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines()[-1] == (
            f"linewise: error: {folder}: not a run, bench or episode folder (no folder under "
            "it holds summary.json and steps.jsonl)")
        assert not out.exists()


def test_memory_build_refuses_a_pruned_folder_that_is_not_a_dataset(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_episode(run, "one", 1)
    result = linewise("memory", "build", str(run), "--pruned", str(run), "--out",
                      str(tmp_path / "m.jsonl"), "--no-embed", timeout=60)
    assert result.returncode == 2
    assert f"--pruned {run}: not a dataset of linewise prune (no trajectories.jsonl" in (
        result.stderr)
    assert not (tmp_path / "m.jsonl").exists()


def test_memory_build_with_no_entry_fails_and_keeps_the_memory_there(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_episode(run, "lost", 2, success=False)
    memory = tmp_path / "memory.jsonl"
    memory.write_text("the memory of yesterday\n")
    result = linewise("memory", "build", str(run), "--out", str(memory), "--no-embed",
                      timeout=60)
    assert result.returncode == EXIT_NOTHING_BUILT
    assert result.stdout.startswith("0 entries (0 from the pruner) from 0 successful of 1 "
                                    "episodes; skipped: did not succeed 1")
    assert result.stderr.splitlines()[-1] == (
        f"linewise: error: no memory entry from 1 episodes: none of them succeeded; {memory} "
        "was not written")
    assert memory.read_text() == "the memory of yesterday\n"


# ---------------------------------------------------------------- improve


@pytest.mark.slow
def test_improve_shows_its_round_phase_and_episodes_as_it_goes(tmp_path: Path) -> None:
    """Real Chromium on the local MiniWoB++ server: a round 0 test bench, one round of
    train, prune, memory and test. Each episode is shown as it ends (done out of the
    loop's whole plan, with an ETA), each phase as it starts, each round as it ends."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(MINIWOB_TASKS)
    out = tmp_path / "improve"
    with ScriptedChatServer(miniwob_solver) as llm:
        process = subprocess.Popen(
            [sys.executable, "-m", "linewise.cli.main", "improve", str(tasks), "--train-seeds",
             "0-0", "--test-seeds", "1-1", "--rounds", "1", "--out", str(out), "--base-url",
             llm.base_url, "--model", "scripted", "--no-screenshots", "--filter", "none",
             "--no-embed"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
        assert process.stderr is not None and process.stdout is not None
        lines, running_at_first_episode = [], None
        for line in process.stderr:
            lines.append(line)
            if running_at_first_episode is None and '"improve progress"' in line:
                running_at_first_episode = process.poll() is None
        stdout = process.stdout.read()
        code = process.wait(timeout=300)
    stderr = "".join(lines)
    assert code == 0, stderr[-3000:]
    assert running_at_first_episode is True  # shown as it went, not at the end

    [started] = events(stderr, "improve started")
    assert started["planned"] == 3 and started["rounds"] == 1  # round 0 test, train, test
    episodes = events(stderr, "improve progress")
    assert [(e["step"], e["done"], e["total"]) for e in episodes] == [
        ("round 0 test (no memory)", 1, 3), ("round 1/1 train", 2, 3), ("round 1/1 test", 3, 3)]
    assert all(e["ended"] == "succeeded" and e["unit"] == "episodes" for e in episodes)
    assert all(isinstance(e["eta_s"], int) and e["eta"].count(":") == 2 for e in episodes)
    assert episodes[-1]["counts"] == {"succeeded": 3} and episodes[-1]["eta_s"] == 0
    phases = [e["step"] for e in events(stderr, "improve phase")]
    assert phases == ["round 0 test (no memory)", "round 1/1 train", "round 1/1 prune",
                      "round 1/1 memory", "round 1/1 test"]
    assert [e["message"] for e in events(stderr, "improve round done")] == [
        "round 0 done: test 100.0 (1/1) (success % ± SE)",
        "round 1/1 done: train 100.0 (1/1); test 100.0 (1/1) (success % ± SE)"]
    assert events(stderr, "prune progress")[0]["ended"] == "unpruned"
    assert (out / "improve.md").read_text() in stdout
