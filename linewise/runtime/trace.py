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

A write the disk refuses (read-only, full, not allowed) is a ``TraceWriteError``, which
stops the run: a run that cannot record what it does is not worth going on with. A
step line is written whole or not at all (``jsonl.append_line``), a summary replaces
the old one whole or leaves it, a screenshot is not left half written.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from pydantic import ValidationError

from linewise.errors import DamagedTraceError, TraceWriteError
from linewise.files import write_atomically
from linewise.jsonl import append_line
from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.redaction import redacted_json

log = structlog.get_logger(__name__)


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
        """Make the folder with its summary inside (see the module's docstring).

        Raises:
            TraceWriteError: the folder cannot be made or written.
        """
        if self.directory.exists():
            with _writing(self.directory):
                self.screenshots.mkdir(exist_ok=True)
                self.steps_path.touch()
            self.write_summary(summary)
            return
        staging = self.directory.with_name(f".{self.directory.name}.starting")
        shutil.rmtree(staging, ignore_errors=True)  # left by a kill during an earlier start
        try:
            (staging / self.screenshots.name).mkdir(parents=True)
            (staging / self.steps_path.name).touch()
            _write_json_atomically(staging / self.summary_path.name,
                                   redacted_json(summary, indent=2))
            os.rename(staging, self.directory)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise TraceWriteError.of(self.directory, exc) from exc

    def write_screenshot(self, index: int, png: bytes) -> str:
        """Write the step's screenshot; ``TraceWriteError`` when it cannot be."""
        name = f"step-{index:03d}.png"
        path = self.screenshots / name
        try:
            path.write_bytes(png)
        except OSError as exc:
            with contextlib.suppress(OSError):
                path.unlink()  # no half of a picture
            raise TraceWriteError.of(path, exc, step=index) from exc
        return f"screenshots/{name}"

    def write_step(self, record: StepRecord) -> None:
        """Append the step's line whole, or raise ``TraceWriteError`` with the file as
        it was."""
        line = redacted_json(record) + "\n"
        try:
            append_line(self.steps_path, line)
        except OSError as exc:
            raise TraceWriteError.of(self.steps_path, exc, step=record.index) from exc

    def write_summary(self, summary: EpisodeSummary) -> None:
        """Replace ``summary.json`` whole; ``TraceWriteError`` leaves the old one."""
        with _writing(self.summary_path):
            _write_json_atomically(self.summary_path, redacted_json(summary, indent=2))


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise TraceWriteError.of(path, exc) from exc


def _write_json_atomically(path: Path, text: str) -> None:
    write_atomically(path, text)


@dataclass
class StepsRead:
    """The steps of a ``steps.jsonl`` that could be read, and what could not.

    A damaged line (not UTF-8, not JSON, nested too deeply, not a step) is skipped with
    a problem saying which and why; the lines after it are still read, so one bad line
    never hides the rest of an episode. A last line without its newline is a step still
    being written (or torn by a kill): it is left out, and is no problem.
    """

    records: list[StepRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    complete_bytes: int = 0
    """How much of the file the complete lines took (where a follower reads on)."""


def parse_step_line(raw: bytes) -> StepRecord:
    """One line of ``steps.jsonl``; ``DamagedTraceError`` says why it is not a step."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DamagedTraceError(f"not UTF-8 (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise DamagedTraceError("JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise DamagedTraceError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    try:
        return StepRecord.model_validate(data)
    except (ValidationError, RecursionError) as exc:
        first = str(exc).splitlines()
        raise DamagedTraceError(f"not a step record ({first[0] if first else exc})") from None


def read_step_lines(data: bytes, first_line: int = 1) -> StepsRead:
    """The steps of the complete lines in ``data`` (a ``steps.jsonl`` or the part of it
    from line ``first_line`` on)."""
    read = StepsRead()
    complete = data[: data.rfind(b"\n") + 1]
    read.complete_bytes = len(complete)
    for number, raw in enumerate(complete.split(b"\n")[:-1], start=first_line):
        if not raw.strip():
            continue
        try:
            read.records.append(parse_step_line(raw))
        except DamagedTraceError as exc:
            read.problems.append(f"steps.jsonl line {number} skipped: {exc}")
    return read


def read_steps_checked(directory: str | os.PathLike[str]) -> StepsRead:
    """``read_steps`` with the problems of the lines it skipped."""
    return read_step_lines((Path(directory) / "steps.jsonl").read_bytes())


def read_steps(directory: str | os.PathLike[str]) -> list[StepRecord]:
    """The steps of an episode folder. A damaged line is skipped with a warning (the
    lines after it are kept); a torn last line (a kill mid-write) is ignored."""
    read = read_steps_checked(directory)
    for problem in read.problems:
        log.warning("damaged trace line", episode=str(directory), problem=problem)
    return read.records


def read_summary(directory: str | os.PathLike[str]) -> EpisodeSummary:
    """The episode's summary (its ``directory`` is that folder); ``DamagedTraceError``
    when summary.json is damaged."""
    folder = Path(directory)
    raw = (folder / "summary.json").read_bytes()
    try:
        summary = EpisodeSummary.model_validate_json(raw)
        summary.directory = folder
        return summary
    except ValidationError as exc:
        first = str(exc).splitlines()
        raise DamagedTraceError(
            f"summary.json is damaged ({first[1].strip() if len(first) > 1 else exc})"
        ) from None
