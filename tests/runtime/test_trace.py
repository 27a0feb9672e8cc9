"""The trace writer's on-disk contract: an episode folder always holds its summary."""

from __future__ import annotations

from pathlib import Path

from linewise.records import EpisodeSummary
from linewise.runtime.trace import EpisodeTraceWriter, read_steps, read_summary


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
