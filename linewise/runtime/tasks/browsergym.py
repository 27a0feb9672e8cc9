"""Bench task files: everything ``linewise run`` accepts, plus BrowserGym's registered tasks.

A ``browsergym:`` entry names a task registered with gymnasium by a BrowserGym package
(``browsergym/miniwob.click-test``, ``browsergym/webarena.310``,
``browsergym/workarena.servicenow.order-standard-laptop``, ``browsergym/openended``); it
runs with that package's own set-up and validation (``runtime/envs/browsergym.py``)::

    tasks:
      - browsergym: miniwob.click-test     # the "browsergym/" prefix is optional
        seed: 3
      - browsergym: webarena.310
        max_steps: 30

They live here rather than in ``runtime/tasks.py`` because only the bench can run them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from linewise.errors import ConfigError, TaskFileError
from linewise.runtime.tasks.schema import (
    DEFAULT_MAX_STEPS,
    MaxSteps,
    Seed,
    TaskFile,
    TaskId,
    load_task_file,
)

BROWSERGYM_FAMILIES = ("miniwob", "webarena", "visualwebarena", "workarena", "openended",
                       "assistantbench", "weblinx")


class BrowserGymTask(BaseModel):
    """One of BrowserGym's registered tasks, run through its gym environment."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    id: TaskId
    browsergym: str = Field(description="The registered name without 'browsergym/'.")
    seed: Seed = 0
    max_steps: MaxSteps = DEFAULT_MAX_STEPS
    task_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Passed to the task (openended: start_url, goal)."
    )

    @model_validator(mode="before")
    @classmethod
    def _default_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("id") is None and isinstance(
            data.get("browsergym"), str
        ):
            name = data["browsergym"].strip().removeprefix("browsergym/")
            data = {**data, "id": f"browsergym.{name}.seed{data.get('seed', 0)}"}
        return data

    @field_validator("browsergym")
    @classmethod
    def _known_family(cls, value: str) -> str:
        name = value.removeprefix("browsergym/")
        family = name.split(".", 1)[0]
        if family not in BROWSERGYM_FAMILIES:
            raise ValueError(
                f"unknown BrowserGym benchmark {family!r}; expected one of "
                + ", ".join(BROWSERGYM_FAMILIES)
            )
        return name

    @property
    def name(self) -> str:
        return self.browsergym

    @property
    def family(self) -> str:
        return self.browsergym.split(".", 1)[0]

    @property
    def env_id(self) -> str:
        return f"browsergym/{self.browsergym}"

    @property
    def kind(self) -> str:
        return "browsergym"


def load_bench_tasks(path: str | os.PathLike[str]) -> list[Any]:
    """The tasks of a bench task file: ``load_task_file``'s, plus ``browsergym:`` entries.

    A file without BrowserGym entries goes through ``load_task_file`` unchanged, with its
    detailed error messages; BrowserGym entries are validated here (defaults apply).
    """
    name = os.fspath(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskFileError(name, "no such file") from None
    except (OSError, yaml.YAMLError):
        return load_task_file(path)  # reports the problem with line numbers
    entries = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not any(
        isinstance(e, dict) and "browsergym" in e for e in entries
    ):
        return load_task_file(path)
    defaults = data.get("defaults") or {}
    tasks: list[Any] = []
    others: list[Any] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and "browsergym" in entry:
            merged = {k: v for k, v in defaults.items() if k in ("seed", "max_steps")}
            try:
                tasks.append((index, BrowserGymTask.model_validate({**merged, **entry})))
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc']) or 'entry'}: {err['msg']}"
                    for err in exc.errors()
                )
                raise TaskFileError(name, f"tasks[{index}]: {problems}") from None
        else:
            others.append((index, entry))
    if others:
        try:
            parsed = TaskFile.model_validate(
                {"defaults": data.get("defaults"), "tasks": [e for _, e in others]}
            ).tasks
        except ValidationError as exc:
            raise TaskFileError(name, str(exc)) from None
        tasks += [(index, task) for (index, _), task in zip(others, parsed, strict=True)]
    ordered = [task for _, task in sorted(tasks, key=lambda item: item[0])]
    ids = [t.id for t in ordered]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise TaskFileError(name, f"duplicate task ids: {', '.join(duplicates)}")
    return ordered


def select_tasks(tasks: list[Any], wanted: list[str], max_steps: int | None) -> list[Any]:
    """``--task ID`` selection and ``--max-steps`` override, as ``linewise run`` does."""
    if wanted:
        unknown = set(wanted) - {t.id for t in tasks}
        if unknown:
            raise ConfigError(f"--task: no task with id {', '.join(sorted(unknown))}")
        tasks = [t for t in tasks if t.id in set(wanted)]
    if max_steps is not None:
        if max_steps < 1:
            raise ConfigError("--max-steps must be at least 1")
        tasks = [t.model_copy(update={"max_steps": max_steps}) for t in tasks]
    return tasks
