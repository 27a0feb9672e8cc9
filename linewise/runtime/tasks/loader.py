"""Reading task files: YAML in, validated tasks out, every problem named precisely.

The schema (``schema.py``) says what a file may hold; this module parses the YAML
(refusing duplicate keys, which YAML would otherwise silently resolve to the last one),
validates it, and turns pydantic's errors into one :class:`~linewise.errors.TaskFileError`
naming the file, the task (index and id) and the field, with the line, e.g.
``tasks/x.yaml: tasks[1] (id 'login'): unknown key 'gaol' (did you mean 'goal'?) (line 8)``.
The same loader serves ``linewise run`` and ``linewise bench`` (every kind of task runs
through the one step loop); :func:`select_tasks` applies both commands' ``--task`` and
``--max-steps``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

import structlog
import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from linewise.errors import ConfigError, TaskFileError
from linewise.runtime.goal_secrets import MARKED, GoalSecrets, take_goal_secrets
from linewise.runtime.tasks.schema import (
    TASK_MODELS,
    AnyTask,
    AttackCheck,
    Defaults,
    SuccessCheck,
    TaskFile,
    WebTask,
    default_task_id,
    merge_defaults,
)

log = structlog.get_logger(__name__)

__all__ = ["adhoc_task", "load_task_file", "select_tasks"]


class _Selectable(Protocol):
    """What ``select_tasks`` needs of a task (every task model has it)."""

    @property
    def id(self) -> str: ...

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        ...


TaskT = TypeVar("TaskT", bound=_Selectable)


def load_task_file(path: str | os.PathLike[str]) -> list[AnyTask]:
    """Read, validate and return the tasks of a YAML task file, of every kind.

    Raises:
        TaskFileError: the file is missing or unreadable, is not YAML, or does not match the
            schema (unknown key, missing field, bad value, unknown MiniWoB++ task or
            BrowserGym benchmark, duplicate id). The message names the file, the task
            (index and id) and the field, and lists every problem found.
    """
    name = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFileError(name, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(name, f"cannot read the file: {exc}") from exc

    data, root = _parse_yaml(name, text)
    if data is None:
        raise TaskFileError(name, "the file is empty; expected a mapping with a 'tasks:' list")
    if not isinstance(data, dict):
        raise TaskFileError(
            name, f"expected a mapping with a 'tasks:' list, got a {_type_name(data)}"
        )

    # Report bad defaults on their own first: merged into every task they would repeat.
    if isinstance(data.get("defaults"), Mapping):
        try:
            Defaults.model_validate(data["defaults"])
        except ValidationError as exc:
            raise _file_error(name, exc, data, root, prefix=("defaults",)) from None

    merged = merge_defaults(data)
    try:
        task_file = TaskFile.model_validate(merged)
    except ValidationError as exc:
        raise _file_error(name, exc, merged, root) from None
    tasks = _take_goal_secrets(name, list(task_file.tasks))
    log.debug("task_file_loaded", path=name, tasks=len(tasks))
    return tasks


def _take_goal_secrets(name: str, tasks: list[AnyTask]) -> list[AnyTask]:
    """Each ``{{secret:VALUE}}`` in a web task's goal made a secret, as ``--goal`` does
    (``goal_secrets.py``; one value is one ``goal_N`` across the file); one anywhere else
    is an error, since nothing else is read for it and the value would stay in clear."""
    goals = GoalSecrets()
    taken: list[AnyTask] = []
    for index, task in enumerate(tasks):
        where = f"tasks[{index}] (id {task.id!r})"
        rest = task.model_dump_json(exclude={"goal"} if isinstance(task, WebTask) else None)
        if MARKED.search(rest):
            raise TaskFileError(name, f"{where}: {{{{secret:...}}}} is read only in the goal "
                                "of a web task (url: and goal:)")
        if isinstance(task, WebTask):
            goal, specs = goals.take(task.goal)
            clash = sorted(set(specs) & set(task.secrets))
            if clash:
                raise TaskFileError(name, f"{where}: the secret name {clash[0]!r} is taken by "
                                    "a {{secret:...}} of the goal; rename it")
            if specs:
                task = task.model_copy(update={"goal": goal,
                                               "secrets": {**task.secrets, **specs}})
        taken.append(task)
    return taken


def adhoc_task(url: str, goal: str, max_steps: int) -> WebTask:
    """Build the one-off web task of ``linewise run --url URL --goal TEXT``; each
    ``{{secret:VALUE}}`` in the goal becomes a secret (``goal_secrets.py``).

    Raises:
        ConfigError: the URL, goal or step budget is not valid.
    """
    goal, secrets = take_goal_secrets(goal)
    try:
        return WebTask(id="adhoc", url=url, goal=goal, max_steps=max_steps, secrets=secrets)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{'-'.join(str(p) for p in err['loc']).replace('_', '-')}: "
            f"{_strip_prefix(err['msg'])}"
            for err in exc.errors()
        )
        raise ConfigError(problems) from None


def select_tasks(
    tasks: Sequence[TaskT], wanted: Sequence[str], max_steps: int | None
) -> list[TaskT]:
    """Apply ``--task ID`` (keep these ids, in file order) and ``--max-steps N`` (override
    every task's step budget), as ``linewise run`` and ``linewise bench`` both take them.

    Raises:
        ConfigError: an id matches no task, or ``max_steps`` is below 1.
    """
    selected = list(tasks)
    if wanted:
        unknown = set(wanted) - {task.id for task in selected}
        if unknown:
            raise ConfigError(f"--task: no task with id {', '.join(sorted(unknown))}; "
                              f"{_listed([task.id for task in selected])}")
        selected = [task for task in selected if task.id in set(wanted)]
    if max_steps is not None:
        if max_steps < 1:
            raise ConfigError("--max-steps must be at least 1")
        selected = [task.model_copy(update={"max_steps": max_steps}) for task in selected]
    return selected


# --------------------------------------------------------------------------- helpers

LISTED_IDS = 30
"""How many valid ids an unknown ``--task`` error lists (a bench file can hold hundreds)."""


def _listed(ids: Sequence[str]) -> str:
    """The valid ids, for an error message."""
    if not ids:
        return "the file has no tasks"
    shown = ", ".join(ids[:LISTED_IDS])
    more = f" and {len(ids) - LISTED_IDS} more" if len(ids) > LISTED_IDS else ""
    return f"the ids are: {shown}{more}"


class _Loader(yaml.SafeLoader):
    """Safe YAML loader that rejects duplicate keys instead of keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[str, yaml.Mark] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            if key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key '{key_node.value}' "
                    f"(first on line {seen[key_node.value].line + 1})",
                    key_node.start_mark,
                )
            seen[key_node.value] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _parse_yaml(name: str, text: str) -> tuple[Any, yaml.Node | None]:
    """Parse ``text``; return the data and its node tree (for line numbers)."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        raise TaskFileError(name, f"invalid YAML: {_yaml_problem(exc)}") from None
    finally:
        loader.dispose()
    return data, root


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "syntax error"
        if mark is not None:
            return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
        return problem
    return str(exc)


def _file_error(
    name: str,
    exc: ValidationError,
    data: Mapping[str, Any],
    root: yaml.Node | None,
    prefix: tuple[str | int, ...] = (),
) -> TaskFileError:
    """Build one error listing every problem, task by task, unknown keys first."""
    errors = [(prefix + tuple(err["loc"]), err) for err in exc.errors()]
    # "unknown key 'gaol' (did you mean 'goal'?)" already says that 'goal' is missing.
    suggested = {
        (*loc[:-1], hint)
        for loc, err in errors
        if err["type"] == "extra_forbidden" and (hint := _suggest(loc, data)) is not None
    }
    errors = [
        (loc, err)
        for loc, err in errors
        if not (err["type"] == "missing" and loc in suggested)
        # A MiniWoB++ or BrowserGym task's id is derived from its name and seed: only
        # report those.
        and not (
            err["type"] == "missing"
            and _tag(loc) in ("miniwob", "browsergym")
            and loc[3:] == ("id",)
        )
    ]
    errors.sort(key=lambda item: (_task_index(item[0]), item[1]["type"] != "extra_forbidden"))
    problems = [_describe(loc, err, data, root) for loc, err in errors]
    return TaskFileError(name, "; ".join(dict.fromkeys(problems)))


def _describe(
    loc: tuple[str | int, ...], err: ErrorDetails, data: Mapping[str, Any], root: yaml.Node | None
) -> str:
    """Turn one pydantic error into ``tasks[1] (id 'x'): unknown key 'gaol' (line 7)``."""
    where, field, _ = _split_loc(loc, data)
    yaml_path = list(loc[:2] + loc[3:]) if _tag(loc) is not None else list(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        hint = _suggest(loc, data)
        problem = f"unknown key '{_dotted(field)}'"
        if hint is not None:
            problem += f" (did you mean '{hint}'?)"
    elif kind == "missing":
        problem = f"missing field '{_dotted(field)}'"
    elif kind in ("model_type", "dict_type", "model_attributes_type"):
        target = f"'{_dotted(field)}'" if field else "the entry"
        problem = f"{target} must be a mapping, got a {_type_name(err.get('input'))}"
    elif kind == "too_short" and loc == ("tasks",):
        problem = "'tasks' must list at least one task"
    elif not loc:
        problem = _strip_prefix(err["msg"])
    else:
        problem = f"field '{_dotted(field)}': {_strip_prefix(err['msg'])}"
        # Our own validators quote the bad value already; pydantic's built-in ones do not.
        value = err.get("input")
        if kind != "value_error" and not isinstance(value, Mapping | list):
            problem += f" (got {value!r})"
    line = _line_of(root, yaml_path)
    parts = [p for p in (where, problem) if p]
    return ": ".join(parts) + (f" (line {line})" if line is not None else "")


def _suggest(loc: tuple[str | int, ...], data: Mapping[str, Any]) -> str | None:
    """For an unknown key, the closest key the model at that place accepts, if any."""
    _, field, model = _split_loc(loc, data)
    if not field or model is None:
        return None
    close = difflib.get_close_matches(str(field[-1]), list(model.model_fields), n=1)
    return close[0] if close else None


def _task_index(loc: tuple[str | int, ...]) -> int:
    """The task a location is in, or -1 for the file level (sorted first)."""
    return loc[1] if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int) else -1


def _tag(loc: tuple[str | int, ...]) -> str | int | None:
    """The union tag pydantic puts after a task's index in error locations, if any."""
    if len(loc) > 2 and loc[0] == "tasks" and isinstance(loc[1], int) and loc[2] in TASK_MODELS:
        return loc[2]
    return None


def _split_loc(
    loc: tuple[str | int, ...], data: Mapping[str, Any]
) -> tuple[str, tuple[str | int, ...], type[BaseModel] | None]:
    """Split an error location into (where, field path, model owning the last key)."""
    if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int):
        index = loc[1]
        tag = _tag(loc)
        field = loc[3:] if tag is not None else loc[2:]
        tasks = data.get("tasks")
        raw = tasks[index] if isinstance(tasks, list) and index < len(tasks) else None
        where = f"tasks[{index}]"
        task_id = _raw_id(raw)
        if task_id:
            where += f" (id '{task_id}')"
        model: type[BaseModel] | None = TASK_MODELS.get(str(tag)) if tag else None
        if field[:1] == ("success",) and len(field) > 1:
            model = SuccessCheck
        if field[:1] == ("attack",) and len(field) > 1:
            model = AttackCheck
        return where, field, model
    if loc[:1] == ("defaults",):
        return "defaults", loc[1:], Defaults
    return "", loc, TaskFile


def _raw_id(raw: Any) -> str | None:
    if not isinstance(raw, Mapping):
        return None
    if isinstance(raw.get("id"), str | int) and str(raw["id"]).strip():
        return str(raw["id"]).strip()
    return default_task_id(raw)


def _line_of(root: yaml.Node | None, path: list[str | int]) -> int | None:
    """Return the 1-based line of the deepest YAML node on ``path`` (a key's own line)."""
    node, line = root, None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                    line, node = key_node.start_mark.line + 1, value_node
                    break
            else:
                break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _dotted(field: tuple[str | int, ...]) -> str:
    return ".".join(str(part) for part in field)


def _strip_prefix(msg: str) -> str:
    return msg.removeprefix("Value error, ")


def _type_name(value: Any) -> str:
    return {
        str: "string",
        int: "number",
        float: "number",
        bool: "boolean",
        list: "list",
        dict: "mapping",
        type(None): "null value",
    }.get(type(value), type(value).__name__)
