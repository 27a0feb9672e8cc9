"""The trace writer's on-disk contract: an episode folder always holds its summary."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog.testing

from linewise.errors import DamagedTraceError
from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.trace import (
    EpisodeTraceWriter,
    read_steps,
    read_steps_checked,
    read_summary,
)


def _summary() -> EpisodeSummary:
    return EpisodeSummary(episode_id="e1", task_id="t", action_model="m", filter="none")


def test_the_folder_appears_with_its_summary_and_a_killed_start_is_cleaned_up(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "none" / "task"
    # what a kill between creating the folder and writing its summary used to leave
    leftover = folder.with_name(".task.starting")
    (leftover / "screenshots").mkdir(parents=True)
    (leftover / "steps.jsonl").write_text("torn")

    EpisodeTraceWriter(folder).start(_summary())

    assert read_summary(folder).status == "running"
    assert read_steps(folder) == [] and (folder / "screenshots").is_dir()
    assert not leftover.exists()
    assert sorted(p.name for p in folder.parent.iterdir()) == ["task"]


def test_starting_in_an_existing_folder_keeps_what_is_there(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("kept")
    EpisodeTraceWriter(tmp_path).start(_summary())
    assert (tmp_path / "notes.txt").read_text() == "kept"
    assert read_summary(tmp_path).task_id == "t"


def test_the_readers_take_a_string_path(tmp_path: Path) -> None:
    EpisodeTraceWriter(tmp_path).start(_summary())
    assert read_summary(str(tmp_path)).task_id == "t"
    assert read_steps(str(tmp_path)) == []


def _step(index: int) -> StepRecord:
    return StepRecord(episode_id="e1", task_id="t", index=index, url="http://x/",
                      axtree="1|RootWebArea", observation="RootWebArea")


def test_a_damaged_line_is_skipped_with_a_warning_and_the_rest_is_read(tmp_path: Path) -> None:
    writer = EpisodeTraceWriter(tmp_path)
    writer.start(_summary())
    writer.write_step(_step(0))
    with (tmp_path / "steps.jsonl").open("ab") as handle:
        handle.write(b"{garbage\n\xff\xfe not utf-8\n" + b"[" * 50_000 + b"]" * 50_000 + b"\n")
        handle.write(b'{"index": "not a step"}\n')
    writer.write_step(_step(1))
    with (tmp_path / "steps.jsonl").open("ab") as handle:
        handle.write(b'{"torn": ')  # a step still being written: no problem
    read = read_steps_checked(str(tmp_path))  # a string path works too
    assert [s.index for s in read.records] == [0, 1]
    assert [p.split(":", 1)[1].strip().split(" (")[0] for p in read.problems] == [
        "not JSON", "not UTF-8", "JSON nested too deeply", "not a step record"]
    assert read.problems[0].startswith("steps.jsonl line 2 skipped")
    with structlog.testing.capture_logs() as logs:
        assert [s.index for s in read_steps(tmp_path)] == [0, 1]
    assert [e["event"] for e in logs] == ["damaged trace line"] * 4


def test_a_damaged_summary_is_a_clear_error(tmp_path: Path) -> None:
    EpisodeTraceWriter(tmp_path).start(_summary())
    (tmp_path / "summary.json").write_bytes(b"\xff not json")
    with pytest.raises(DamagedTraceError, match=r"summary\.json is damaged"):
        read_summary(tmp_path)
