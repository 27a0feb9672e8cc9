"""Trace records and the writer that puts them on disk as the episode runs.

One folder per episode::

    <episode>/steps.jsonl          one StepRecord per line, appended and flushed each step
    <episode>/screenshots/step-NNN.png
    <episode>/summary.json         EpisodeSummary; status "running" until the episode ends

A kill at any moment loses at most the step in flight: every finished step is already
on disk, and summary.json says the episode never finished. The folder appears with its
summary already inside (it is built under a hidden name and renamed), so no reader ever
meets an episode folder without one.

This writer is the one point where records reach disk, so every record and summary
passes the run's redactor here (``redaction.py``): the loop already shows the model
``<secret:NAME>`` instead of a value, and this is the safety net behind it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.redaction import redacted_json


def safe_name(text: str) -> str:
    """A folder name made from a task id."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return name[:120] or "episode"


class EpisodeTraceWriter:
    """Writes one episode's folder. Steps are appended, flushed and fsynced as they end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.screenshots = directory / "screenshots"
        self.steps_path = directory / "steps.jsonl"
        self.summary_path = directory / "summary.json"

    def start(self, summary: EpisodeSummary) -> None:
        if self.directory.exists():
            self.screenshots.mkdir(exist_ok=True)
            self.steps_path.touch()
            self.write_summary(summary)
            return
        staging = self.directory.with_name(f".{self.directory.name}.starting")
        shutil.rmtree(staging, ignore_errors=True)  # left by a kill during an earlier start
        (staging / self.screenshots.name).mkdir(parents=True)
        (staging / self.steps_path.name).touch()
        _write_json_atomically(staging / self.summary_path.name, redacted_json(summary, indent=2))
        os.rename(staging, self.directory)

    def write_screenshot(self, index: int, png: bytes) -> str:
        name = f"step-{index:03d}.png"
        (self.screenshots / name).write_bytes(png)
        return f"screenshots/{name}"

    def write_step(self, record: StepRecord) -> None:
        line = redacted_json(record) + "\n"
        with self.steps_path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def write_summary(self, summary: EpisodeSummary) -> None:
        _write_json_atomically(self.summary_path, redacted_json(summary, indent=2))


def _write_json_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_steps(directory: str | os.PathLike[str]) -> list[StepRecord]:
    """The steps of an episode folder; a torn last line (a kill mid-write) is ignored."""
    steps: list[StepRecord] = []
    path = Path(directory) / "steps.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            steps.append(StepRecord.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValueError):
            break
    return steps


def read_summary(directory: str | os.PathLike[str]) -> EpisodeSummary:
    """The summary of an episode folder (its ``directory`` is that folder)."""
    folder = Path(directory)
    summary = EpisodeSummary.model_validate_json((folder / "summary.json").read_text("utf-8"))
    summary.directory = folder
    return summary
