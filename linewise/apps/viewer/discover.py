"""What a folder given to ``linewise view`` is, and the episode folders inside it.

A bench runs an episode again after an infrastructure fault, or after its run was
killed, and sets the earlier attempt's folder aside first:
``<bench>/_infra/<filter>/<task>.<stamp>/`` or ``<bench>/_incomplete/…``
(``apps/bench/plan.set_aside_unfinished``). Such a folder is an attempt of the episode
at ``<filter>/<task>/``, not an episode of its own (``attempt_of``): the index lists
each episode once, as the report counts it, with its earlier attempts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from linewise.apps.viewer.paths import SINGLE_EPISODE, VIEW_DIR
from linewise.errors import ConfigError
from linewise.jsonl import read_jsonl

FolderKind = Literal["episode", "run", "bench"]

RESULTS_FILE = "results.jsonl"
BENCH_MANIFEST = "bench.json"
RUN_MANIFEST = "run.json"
ATTEMPT_DIRS = ("_infra", "_incomplete")
"""Where a bench sets aside the earlier attempts of episodes it runs again (the names of
``apps/bench/plan.INFRA_DIR`` and ``INCOMPLETE_DIR``, which the viewer may not import:
the bench imports the viewer)."""

_STAMP = re.compile(r"\.\d{8}-\d{6}(?:-\d+)?$")
"""The time ``set_aside_unfinished`` adds to an attempt's folder name."""

MAX_DEPTH = 3
"""Episode folders sit at most this deep: ``<filter>/<task>/`` in a bench folder."""


@dataclass(frozen=True)
class EpisodeFolder:
    rel: str
    """The path under the folder shown, with slashes; ``"."`` for that folder itself."""
    path: Path


class ResultRow(BaseModel):
    """What the viewer reads of a bench's ``results.jsonl`` line."""

    model_config = ConfigDict(extra="ignore")

    episode_dir: str = ""
    error_kind: str | None = None
    error: str | None = None
    seed: int | None = None


def is_episode(path: Path) -> bool:
    return (path / "summary.json").is_file() and (path / "steps.jsonl").is_file()


def folder_kind(path: Path) -> FolderKind:
    if not path.is_dir():
        raise ConfigError(f"{path} is not a folder")
    if is_episode(path):
        return "episode"
    if (path / RESULTS_FILE).is_file() or (path / BENCH_MANIFEST).is_file():
        return "bench"
    if (path / RUN_MANIFEST).is_file() or find_episodes(path):
        return "run"
    raise ConfigError(
        f"{path} holds no trace: give an episode folder (steps.jsonl, summary.json), "
        "a run folder or a bench folder"
    )


def find_episodes(root: Path) -> list[EpisodeFolder]:
    """The episode folders under ``root`` (or ``root`` itself), in path order."""
    if is_episode(root):
        return [EpisodeFolder(SINGLE_EPISODE, root)]
    found: list[EpisodeFolder] = []

    def walk(folder: Path, depth: int) -> None:
        for child in sorted(folder.iterdir()):
            if not child.is_dir() or child.name == VIEW_DIR:
                continue
            if is_episode(child):
                found.append(EpisodeFolder(child.relative_to(root).as_posix(), child))
            elif depth < MAX_DEPTH:
                walk(child, depth + 1)

    walk(root, 1)
    return found


def attempt_of(rel: str) -> str | None:
    """For an attempt set aside by a bench (``_infra/<filter>/<task>.<stamp>``), the
    episode it was an attempt of (``<filter>/<task>``); None for any other folder."""
    parts = rel.split("/")
    if len(parts) != 3 or parts[0] not in ATTEMPT_DIRS:
        return None
    name = _STAMP.sub("", parts[2])
    return f"{parts[1]}/{name}" if name != parts[2] else None


def planned_episodes(root: Path) -> list[tuple[str, int, str]]:
    """The episodes a bench set out to run (``bench.json``'s ``planned``: task id,
    seed, filter), in order; empty when unknown."""
    try:
        planned = json.loads((root / BENCH_MANIFEST).read_bytes()).get("planned", [])
    except (OSError, ValueError, AttributeError, RecursionError):
        return []
    if not isinstance(planned, list):
        return []
    return [(task, seed, name) for entry in planned
            if isinstance(entry, list) and len(entry) == 3
            for task, seed, name in [entry]
            if isinstance(task, str) and isinstance(seed, int) and isinstance(name, str)]


def run_unended(root: Path) -> bool:
    """Whether the last run on a bench folder recorded no end (``bench.json``: its last
    invocation's ``ended`` is null): it is running, or was killed outright."""
    try:
        invocations = json.loads((root / BENCH_MANIFEST).read_bytes()).get("invocations")
    except (OSError, ValueError, AttributeError, RecursionError):
        return False
    if not isinstance(invocations, list) or not invocations:
        return False
    last = invocations[-1]
    return isinstance(last, dict) and "ended" in last and last["ended"] is None


def read_result_rows(root: Path) -> dict[str, ResultRow]:
    """A bench's results lines by episode folder; the last line wins, a torn one is
    skipped."""
    path = root / RESULTS_FILE
    rows: dict[str, ResultRow] = {}
    if not path.is_file():
        return rows
    # A line that is not UTF-8 or not JSON is no row: it is skipped like a torn one.
    for line in read_jsonl(path.read_bytes()):
        try:
            row = ResultRow.model_validate(line.value) if line.error is None else None
        except (ValidationError, RecursionError):
            continue
        if row is None:
            continue
        if row.episode_dir:
            rows[row.episode_dir.strip("/")] = row
    return rows


def planned_tasks(root: Path) -> list[str]:
    """The task ids a run set out to run (``run.json``), in order; empty when unknown."""
    path = root / RUN_MANIFEST
    try:
        tasks = json.loads(path.read_bytes()).get("tasks", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [task for task in tasks if isinstance(task, str)] if isinstance(tasks, list) else []
