"""The replay cache (``--replay-cache DIR``): a solved task is replayed, not re-solved.

Each successful episode of a run with a cache leaves its program in the folder, keyed by
the task's whole definition (its id, its start URL or MiniWoB++ page and seed, its goal):
a task that changed in any of these is another task. The next run of the same task
replays the program first (healed by the model where the page changed) and asks the
model to solve it only when the replay cannot be brought back; the episode is then
``healed``, never the agent's own result. A successful replay or healing refreshes the
program, so a healed page is healed once.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import structlog

from linewise.errors import ConfigError, ProgramError
from linewise.runtime.replay.program import (
    Program,
    program_from_episode,
    read_program_file,
    task_spec,
    write_program_file,
)
from linewise.runtime.tasks.schema import AnyTask
from linewise.runtime.trace import safe_name

log = structlog.get_logger(__name__)


def task_key(task: AnyTask) -> str:
    """A digest of the task's definition: equal keys, the same task."""
    canonical = json.dumps(task_spec(task), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class ReplayCache:
    """A folder of programs, one per solved task."""

    def __init__(self, directory: Path) -> None:
        if directory.exists() and not directory.is_dir():
            raise ConfigError(f"--replay-cache {directory}: not a folder")
        self.directory = directory

    def path_of(self, task: AnyTask) -> Path:
        return self.directory / f"{safe_name(task.id)}.{task_key(task)}.json"

    def lookup(self, task: AnyTask) -> Program | None:
        """The task's program, if a run solved it before; a damaged file is ignored
        with a warning (the task is then solved by the model and the file replaced)."""
        path = self.path_of(task)
        if not path.is_file():
            return None
        try:
            return read_program_file(path)
        except ProgramError as exc:
            log.warning("replay cache entry unreadable: solving the task anew", error=str(exc))
            return None

    def store(self, task: AnyTask, episode: Path) -> None:
        """Keep the program of a successful episode of ``task``."""
        try:
            program = program_from_episode(episode)
        except ProgramError as exc:
            log.info("nothing to keep in the replay cache", task_id=task.id, reason=str(exc))
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        write_program_file(program, self.path_of(task))
