"""``linewise prune``, ``memory build`` and ``improve`` as a person runs them: a real
process on real trace folders, with a scripted model behind real HTTP. What they print
while they work, what they say at the end, their exit codes, and what they refuse."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.trace import EpisodeTraceWriter
from tests.support.cli import linewise


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


# ---------------------------------------------------------------- not a run


def not_runs(tmp_path: Path) -> list[Path]:
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "photos"
    (other / "2024").mkdir(parents=True)
    (other / "2024" / "summary.json").write_text("{}")  # no steps.jsonl: not an episode
    (other / "notes.txt").write_text("not a run")
    return [empty, other]


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
