"""Memory entries and their file: one ``MemoryEntry`` per line of a JSONL file.

Every line carries ``version``; a reader refuses a line of another version rather than
misreading it. An entry is one successful episode reduced to the steps that mattered
(the pruner's kept steps when a pruned trajectory exists, else the steps that ran
without error), each with the line of the element it acted on, its thought and its
action: never the page's text around it, which is untrusted (``untrusted.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, Field, ValidationError

from linewise.errors import ConfigError
from linewise.files import write_atomically
from linewise.jsonl import read_jsonl

MEMORY_VERSION = 1

_SEEDED_ID = re.compile(r"^(?P<task>.+)\.seed(?P<seed>\d+)$")


class TaskKey(NamedTuple):
    """A task without its seed, and the seed (None: the task has none, or it is not known)."""

    task: str
    seed: int | None


def task_key(task_id: str, seed: int | None = None) -> TaskKey:
    """The key of a task id: ``miniwob.click-test.seed3`` is (``miniwob.click-test``, 3).
    A given ``seed`` wins over the one the id names."""
    match = _SEEDED_ID.match(task_id)
    if match is None:
        return TaskKey(task_id, seed)
    return TaskKey(match["task"], seed if seed is not None else int(match["seed"]))


def same_task_and_seed(a: TaskKey, b: TaskKey) -> bool:
    """Whether two keys may be the same episode: the same task, and the same seed or a
    seed unknown on either side (then only the task can tell, and it is taken as equal)."""
    return a.task == b.task and (a.seed is None or b.seed is None or a.seed == b.seed)


class MemoryStep(BaseModel):
    """One kept step: where it acted, what it thought, what it did."""

    index: int = Field(description="The step's index in its episode (0-based).")
    url: str = ""
    observation: str = Field(
        default="",
        description="The acted element's own line, its bid, role and name, from the view "
        "the agent was shown (empty for an action without an element). Entries of an older "
        "linewise hold lines around it too: they are never shown (``untrusted.py``)."
    )
    think: str = ""
    action: str


class MemoryEntry(BaseModel):
    """One successful episode as a worked example."""

    version: int = MEMORY_VERSION
    id: str = Field(description="Unique in its file: <task_id>/<episode_id>.")
    task_id: str
    task: str = Field(description="The task without its seed (miniwob.click-test).")
    seed: int | None = None
    kind: str = Field(default="", description="The benchmark: miniwob, web, browsergym/<family>.")
    goal: str
    source: str = Field(default="", description="The episode folder it was built from.")
    site: str = Field(default="", description="The URL the episode started on: links to "
                      "other sites in what the entry would show are taken for injections.")
    pruned: bool = Field(default=False, description="Steps are the pruner's kept steps.")
    steps: list[MemoryStep]
    embedder: str | None = Field(default=None, description="Who computed ``embedding``.")
    embedding: list[float] | None = Field(
        default=None, description="Unit vector of the entry's search text (goal and pages)."
    )

    @property
    def key(self) -> TaskKey:
        return TaskKey(self.task, self.seed)

    def search_text(self) -> str:
        """What retrieval matches against: the goal and the elements it acted on."""
        return "\n".join([self.goal, *(s.observation for s in self.steps)])


def write_memory(path: Path, entries: Iterable[MemoryEntry]) -> int:
    """Write ``entries`` as JSONL (replacing the file atomically); returns how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [entry.model_dump_json() + "\n" for entry in entries]
    write_atomically(path, "".join(lines))
    return len(lines)


def read_memory(path: Path) -> list[MemoryEntry]:
    """The entries of a memory file. Lines end at ``\\n`` only (``linewise/jsonl.py``: a
    thought may hold U+2028 or U+0085, which ``str.splitlines`` would cut at).

    Raises:
        ConfigError: the file is missing or unreadable, or a line is not UTF-8, not JSON
            (or nested too deeply), or not an entry of this version; the message names
            the file and the line.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"memory {path}: {exc.strerror or exc}") from exc
    entries: list[MemoryEntry] = []
    for line in read_jsonl(data):
        where = f"memory {path} line {line.number}"
        if line.error is not None:
            raise ConfigError(f"{where}: {line.error}; build the memory again")
        value = line.value
        version = value.get("version") if isinstance(value, dict) else None
        if version != MEMORY_VERSION:
            raise ConfigError(f"{where}: version {version!r}, this linewise "
                              f"reads version {MEMORY_VERSION}; build the memory again")
        try:
            entries.append(MemoryEntry.model_validate(value))
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"])
            raise ConfigError(f"{where}: not a memory entry ({field}: {error['msg']})") from None
        except RecursionError:
            raise ConfigError(f"{where}: not a memory entry (nested too deeply)") from None
    return entries


def overlapping(entries: Iterable[MemoryEntry], keys: Iterable[TaskKey]) -> list[TaskKey]:
    """The ``keys`` (e.g. the episodes a bench tests on) that some entry was built from:
    a memory holding them would leak the answers of the episodes it is tested on."""
    held = [entry.key for entry in entries]
    return sorted({key for key in keys if any(same_task_and_seed(key, h) for h in held)},
                  key=lambda k: (k.task, -1 if k.seed is None else k.seed))
