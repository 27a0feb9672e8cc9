"""An output folder that is read-only or fills up under a run: a clear error with exit
code 5 that names the folder, the step not saved, the episode cut short and the tasks
not run; no traceback, no torn JSONL line, no episode running on unrecorded.

The folders are real: a tiny tmpfs mounted for the test, filled up or remounted
read-only by the scripted model itself in the middle of an episode (the tests run as
root, where a chmod stops nothing). The commands run as a user runs them."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from linewise.jsonl import append_line
from linewise.testing import ScriptedChatServer, miniwob_solver, prompt_section
from tests.support.cli import linewise

TASKS = """\
defaults: {max_steps: 3}
tasks:
  - {miniwob: click-test, seed: 0}
  - {miniwob: enter-text, seed: 0}
  - {miniwob: click-button, seed: 0}
"""
IDS = ["miniwob.click-test.seed0", "miniwob.enter-text.seed0", "miniwob.click-button.seed0"]


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 32 MiB tmpfs of the test's own."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_up(disk: Path, leave: int = 4096) -> None:
    """Fill ``disk`` to the last byte, then free ``leave`` bytes: a step line longer than
    that is taken in part, and the rest refused (ENOSPC)."""
    with (disk / "filler").open("wb", buffering=0) as handle:
        chunk = b"\0" * (1 << 20)
        while True:
            try:
                handle.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]
        handle.truncate(handle.tell() - leave)


def remount_read_only(disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)


def solver_that(act: Callable[[], None]) -> Callable[[list[dict[str, Any]]], str]:
    """``miniwob_solver``, which calls ``act`` once, when it is asked for enter-text's
    second step (the first, its fill, is on disk by then)."""
    done: list[bool] = []

    def script(messages: list[dict[str, Any]]) -> str:
        prompt = messages[1]["content"]
        history = prompt_section(prompt, "History of your previous steps")
        if not done and "fill(" in history:
            done.append(True)
            act()
        return miniwob_solver(messages)

    return script


def _run(command: str, out: Path, script: Callable[[list[dict[str, Any]]], str],
         tasks: Path) -> subprocess.CompletedProcess[str]:
    one_at_a_time = ["--concurrency", "1"] if command == "bench" else []
    with ScriptedChatServer(script) as llm:
        return linewise(command, str(tasks), "--out", str(out), "--base-url", llm.base_url,
                        "--model", "scripted", "--no-screenshots", "--log-json",
                        *one_at_a_time, timeout=300)


def _lines_whole(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file, each of which must be complete JSON."""
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), f"{path} ends in a torn line"
    return [json.loads(line) for line in data.split(b"\n") if line]


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.yaml"
    path.write_text(TASKS)
    return path


@pytest.mark.slow
def test_a_read_only_out_folder_stops_the_run_before_it_starts(
    disk: Path, tasks: Path
) -> None:
    remount_read_only(disk)
    result = _run("run", disk / "run", miniwob_solver, tasks)
    assert result.returncode == 5, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert (f"linewise: error: cannot write the trace in {disk / 'run'}: "
            "Read-only file system") in result.stderr
    assert f"3 tasks not run: {', '.join(IDS)}" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("failure", ["full", "read-only"])
def test_a_disk_that_fails_mid_run_stops_it_with_whole_lines(
    disk: Path, tasks: Path, failure: str
) -> None:
    act = (lambda: fill_up(disk)) if failure == "full" else (lambda: remount_read_only(disk))
    out = disk / "run"
    result = _run("run", out, solver_that(act), tasks)
    assert result.returncode == 5, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    reason = "No space left on device" if failure == "full" else "Read-only file system"
    steps = out / IDS[1] / "steps.jsonl"
    error = result.stderr.split("linewise: error: ", 1)[1]
    assert error.startswith(f"cannot write the trace in {out}: {reason} ({steps}; "
                            "step 1 is not saved). The run stopped"), error
    assert f"cut short: {IDS[1]}" in error
    assert "1 episodes finished before (their traces are complete)" in error
    assert f"1 tasks not run: {IDS[2]}" in error
    # the first episode is whole; the second holds its first step, whole, and no more
    [click] = _lines_whole(out / IDS[0] / "steps.jsonl")
    assert click["action"].startswith("click(")
    assert [s["index"] for s in _lines_whole(steps)] == [0]
    assert not (out / IDS[2]).exists()


@pytest.mark.slow
def test_a_bench_whose_disk_fills_stops_with_whole_lines(disk: Path, tasks: Path) -> None:
    out = disk / "bench"
    result = _run("bench", out, solver_that(lambda: fill_up(disk)), tasks)
    assert result.returncode == 5, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    error = result.stderr.split("linewise: error: ", 1)[1]
    assert error.startswith(f"cannot write the trace in {out}: No space left on device"), error
    assert "cut short: miniwob.enter-text.seed0 (seed 0, filter auto)" in error
    assert "1 tasks not run: miniwob.click-button.seed0 (seed 0, filter auto)" in error
    rows = _lines_whole(out / "results.jsonl")
    assert [row["task_id"] for row in rows] == [IDS[0]]  # resume runs the other two
    _lines_whole(out / "auto" / IDS[1] / "steps.jsonl")


def test_a_line_the_disk_takes_only_in_part_is_cut_back(disk: Path) -> None:
    path = disk / "lines.jsonl"
    append_line(path, '{"n": 1}\n')
    fill_up(disk, leave=4096)
    with pytest.raises(OSError) as raised:
        append_line(path, json.dumps({"n": 2, "pad": "x" * 20_000}) + "\n")
    assert raised.value.errno == errno.ENOSPC
    assert path.read_bytes() == b'{"n": 1}\n'
