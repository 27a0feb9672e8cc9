"""The bench plan: every (task, seed, filter) episode, its stable key and its folder.

Resume works because an episode's identity and place never depend on when or where it
ran: the key is ``(task_id, seed, filter)`` and the folder is
``DIR/<filter>/<task_id>/``. Seeds (``--seeds K``) are expanded here:

- a MiniWoB++ task with seed ``s`` runs seeds ``s, s+1, …, s+K-1``; its id is re-derived
  (``miniwob.click-test.seed0`` → ``…seed1``…), or ``<id>.seed<n>`` for a custom id;
- a web task has no seed of its own: it runs ``K`` times as ``<id>.seed0`` … (seed = the
  run's index; with ``K = 1`` the id is kept and the seed is 0).

Episodes are ordered seed-major, then task, then filter, so a bench cut short still
compares every filter on the same episodes.
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import structlog
from pydantic import BaseModel, ConfigDict

from linewise.records import FINAL_OUTCOMES
from linewise.runtime.tasks.schema import AnyTask, BrowserGymTask, MiniWoBTask, Task
from linewise.runtime.trace import read_summary, safe_name

log = structlog.get_logger(__name__)

INCOMPLETE_DIR = "_incomplete"
"""Where resume moves the folders of episodes a killed run left unfinished."""

INFRA_DIR = "_infra"
"""Where the folders (and results lines) of episodes that ended on an infrastructure
fault go before they run again."""


class EpisodeKey(NamedTuple):
    task_id: str
    seed: int
    filter: str

    def __str__(self) -> str:
        return f"{self.task_id} (seed {self.seed}, filter {self.filter})"


class EpisodeSpec(BaseModel):
    """One episode to run: the task (with its seed applied), the filter, and its names."""

    model_config = ConfigDict(frozen=True)

    task: AnyTask
    base_task: str
    """The task as the file names it, the same for every seed (the report's task rows)."""
    seed: int
    filter: str
    benchmark: str
    """``miniwob``, ``web`` or ``browsergym/<family>`` (the report groups by it)."""

    @property
    def key(self) -> EpisodeKey:
        return EpisodeKey(self.task.id, self.seed, self.filter)

    def folder(self, out_dir: Path) -> Path:
        return out_dir / filter_folder(self.filter) / safe_name(self.task.id)

    def relative_folder(self) -> str:
        return f"{filter_folder(self.filter)}/{safe_name(self.task.id)}"


def filter_folder(name: str) -> str:
    return safe_name(name)


def benchmark_of(task: Task | BrowserGymTask) -> str:
    if isinstance(task, MiniWoBTask):
        return "miniwob"
    if isinstance(task, BrowserGymTask):
        return f"browsergym/{task.family}"
    return "web"


def expand(tasks: list[AnyTask], filters: list[str], seeds: int) -> list[EpisodeSpec]:
    """Every episode of the bench, in run order; duplicate keys are dropped (first wins)."""
    if seeds < 1:
        raise ValueError("seeds must be at least 1")
    specs: list[EpisodeSpec] = []
    seen: set[EpisodeKey] = set()
    for index in range(seeds):
        for task in tasks:
            seeded, base, seed = _with_seed(task, index, seeds)
            for name in filters:
                spec = EpisodeSpec(
                    task=seeded, base_task=base, seed=seed, filter=name,
                    benchmark=benchmark_of(task),
                )
                if spec.key in seen:
                    log.warning("duplicate episode dropped", episode=str(spec.key))
                    continue
                seen.add(spec.key)
                specs.append(spec)
    return specs


def _with_seed(task: AnyTask, index: int, seeds: int) -> tuple[AnyTask, str, int]:
    """The task for the ``index``-th seed, its base id, and the seed."""
    if isinstance(task, MiniWoBTask | BrowserGymTask):
        seed = task.seed + index
        derived = task.id == default_id(task, task.seed)
        base = default_id(task, None) if derived else task.id
        if seeds == 1:
            return task, base, seed
        new_id = default_id(task, seed) if derived else f"{task.id}.seed{seed}"
        return task.model_copy(update={"id": new_id, "seed": seed}), base, seed
    if seeds == 1:
        return task, task.id, 0
    return task.model_copy(update={"id": f"{task.id}.seed{index}"}), task.id, index


def default_id(task: MiniWoBTask | BrowserGymTask, seed: int | None) -> str:
    """The id a seeded task gets when its file does not name it (``None``: no seed part)."""
    stem = (f"miniwob.{task.miniwob}" if isinstance(task, MiniWoBTask)
            else f"browsergym.{task.name}")
    return stem if seed is None else f"{stem}.seed{seed}"


def set_aside_unfinished(
    out_dir: Path, specs: list[EpisodeSpec], into: str = INCOMPLETE_DIR
) -> list[Path]:
    """Move the folders of episodes that will run again out of the way.

    A folder left by a killed run holds a partial trace; mixing it with the new one would
    make both unreadable, and deleting it would lose evidence of what went wrong. It goes
    to ``DIR/<into>/<filter>/<task>.<timestamp>`` (``_incomplete``, or ``_infra`` for an
    infrastructure ending), which the report ignores.
    """
    moved: list[Path] = []
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    for spec in specs:
        folder = spec.folder(out_dir)
        if not folder.exists():
            continue
        target = out_dir / into / filter_folder(spec.filter) / f"{folder.name}.{stamp}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder), str(target))
        moved.append(target)
        log.info("unfinished episode set aside", episode=str(spec.key), to=str(target))
    return moved


def finished_summary(out_dir: Path, spec: EpisodeSpec) -> bool:
    """Whether the episode's folder holds an ended episode (a kill came after its
    summary was written but before its results line): such an episode is recovered,
    not run again. An interrupted one (Ctrl-C) or one that ended on an infrastructure
    fault runs again."""
    folder = spec.folder(out_dir)
    if not (folder / "summary.json").exists():
        return False
    try:
        summary = read_summary(folder)
    except ValueError:
        return False
    return (summary.status != "running" and summary.error != "episode was interrupted"
            and summary.outcome in FINAL_OUTCOMES)
