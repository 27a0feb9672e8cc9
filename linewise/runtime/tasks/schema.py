"""Task files: YAML lists of web and MiniWoB++ tasks, validated with pydantic.

A task file looks like this::

    defaults:            # optional; merged into every task that accepts the key
      max_steps: 10
      seed: 0
    tasks:
      - id: docs-search
        url: https://docs.python.org/3/
        goal: Find the page about the asyncio event loop.
        success:
          url_contains: asyncio-eventloop
      - miniwob: click-button   # id defaults to miniwob.click-button.seed3
        seed: 3

A task with a ``miniwob`` key is a :class:`MiniWoBTask`, anything else a :class:`WebTask`.
``max_steps`` falls back to ``defaults`` and then to 15. Every problem in a file is reported
in one :class:`~linewise.errors.TaskFileError` naming the file, the task (index and
id) and the field, e.g. ``tasks/x.yaml: tasks[1] (id 'login'): unknown key 'gaol'``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import structlog
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from linewise.errors import ConfigError, TaskFileError
from linewise.runtime.tasks.miniwob_server import check_task_name

log = structlog.get_logger(__name__)

__all__ = [
    "DEFAULT_MAX_STEPS",
    "Defaults",
    "MiniWoBTask",
    "SuccessCheck",
    "Task",
    "TaskFile",
    "WebTask",
    "adhoc_task",
    "load_task_file",
]

DEFAULT_MAX_STEPS = 15
"""Step budget of a task when neither the task nor the file's ``defaults`` set one."""

_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_URL_SCHEMES = ("http", "https", "file")

_MODEL_CONFIG = ConfigDict(
    extra="forbid", frozen=True, str_strip_whitespace=True, coerce_numbers_to_str=True
)


def _check_id(value: str) -> str:
    if not re.fullmatch(_ID_PATTERN, value):
        raise ValueError(
            f"'{value}' must start with a letter or digit and contain only letters, digits, "
            "'.', '_' and '-'"
        )
    return value


TaskId = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_check_id)]
"""A task id: letters, digits, ``.``, ``_`` and ``-``; it names the task's trace files."""

MaxSteps = Annotated[int, Field(strict=True, ge=1)]
Seed = Annotated[int, Field(strict=True, ge=0, lt=2**32)]


def _normalize(text: str) -> str:
    """Casefold ``text`` and collapse runs of whitespace, for forgiving substring checks."""
    return " ".join(text.split()).casefold()


class SuccessCheck(BaseModel):
    """How to tell that a web task succeeded; every condition given must hold.

    ``url_contains`` and ``url_matches`` look at the final page URL (a case-sensitive
    substring, and a regular expression searched anywhere in it). ``page_contains`` and
    ``answer_contains`` are case-insensitive substrings, with runs of whitespace treated as
    one space, of the final page's text and of the agent's last ``send_msg_to_user`` message.
    """

    model_config = _MODEL_CONFIG

    url_contains: str | None = Field(default=None, min_length=1)
    url_matches: str | None = Field(default=None, min_length=1)
    page_contains: str | None = Field(default=None, min_length=1)
    answer_contains: str | None = Field(default=None, min_length=1)

    @field_validator("url_matches")
    @classmethod
    def _compile(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> SuccessCheck:
        if all(value is None for _, value in self):
            names = ", ".join(type(self).model_fields)
            raise PydanticCustomError("empty_check", f"give at least one of {names}")
        return self

    def evaluate(self, url: str, page_text: str, answer: str | None) -> bool:
        """Return whether every given condition holds at the end of an episode.

        Args:
            url: the final page URL.
            page_text: the final page's visible text.
            answer: the agent's last message to the user, or None if it sent none.
        """
        if self.url_contains is not None and self.url_contains not in url:
            return False
        if self.url_matches is not None and re.search(self.url_matches, url) is None:
            return False
        if self.page_contains is not None and (
            _normalize(self.page_contains) not in _normalize(page_text)
        ):
            return False
        return self.answer_contains is None or (
            answer is not None and _normalize(self.answer_contains) in _normalize(answer)
        )


class WebTask(BaseModel):
    """A goal to reach on any web site, starting from ``url``."""

    model_config = _MODEL_CONFIG

    id: TaskId
    url: str
    goal: str = Field(min_length=1)
    max_steps: MaxSteps = DEFAULT_MAX_STEPS
    success: SuccessCheck | None = None
    """Checked at the end of the episode; without it success is unknown (None)."""

    @property
    def kind(self) -> Literal["web"]:
        """``"web"``: the kind of task."""
        return "web"

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in _URL_SCHEMES:
            hint = f" (did you mean 'https://{value}'?)" if not parts.scheme else ""
            raise ValueError(f"must be an http(s):// or file:// URL, got '{value}'{hint}")
        if parts.scheme != "file" and not parts.netloc:
            raise ValueError(f"has no host: '{value}'")
        return value


class MiniWoBTask(BaseModel):
    """A seeded episode of one MiniWoB++ task, served offline from the ``miniwob`` package."""

    model_config = _MODEL_CONFIG

    id: TaskId
    miniwob: str
    """The task's name, e.g. ``click-test`` (``miniwob/html/miniwob/<name>.html``)."""
    seed: Seed
    max_steps: MaxSteps = DEFAULT_MAX_STEPS

    @property
    def kind(self) -> Literal["miniwob"]:
        """``"miniwob"``: the kind of task."""
        return "miniwob"

    @model_validator(mode="before")
    @classmethod
    def _default_id(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("id") is None:
            default = _default_miniwob_id(data)
            if default is not None:
                return {**data, "id": default}
        return data

    @field_validator("miniwob")
    @classmethod
    def _known_task(cls, value: str) -> str:
        return check_task_name(value)


Task = WebTask | MiniWoBTask
"""Any task; a :class:`MiniWoBTask` if the YAML mapping has a ``miniwob`` key."""


def _task_kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "miniwob" if "miniwob" in value else "web"
    return "miniwob" if isinstance(value, MiniWoBTask) else "web"


_TaskEntry = Annotated[
    Annotated[WebTask, Tag("web")] | Annotated[MiniWoBTask, Tag("miniwob")],
    Discriminator(_task_kind),
]
_TASK_MODELS: dict[str, type[BaseModel]] = {"web": WebTask, "miniwob": MiniWoBTask}


class Defaults(BaseModel):
    """Values merged into every task that accepts the key and does not set it itself."""

    model_config = _MODEL_CONFIG

    max_steps: MaxSteps | None = None
    seed: Seed | None = None
    """Only MiniWoB++ tasks take a seed; web tasks ignore this one."""


class TaskFile(BaseModel):
    """A whole task file: optional ``defaults`` and a non-empty list of ``tasks``."""

    model_config = _MODEL_CONFIG

    defaults: Defaults | None = None
    tasks: list[_TaskEntry] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        return _merge_defaults(data)

    @model_validator(mode="after")
    def _unique_ids(self) -> TaskFile:
        first: dict[str, int] = {}
        for index, task in enumerate(self.tasks):
            if task.id in first:
                raise PydanticCustomError(
                    "duplicate_id",
                    "tasks[{index}] (id '{id}'): duplicate id, already used by tasks[{first}]",
                    {"index": index, "id": task.id, "first": first[task.id]},
                )
            first[task.id] = index
        return self


# --------------------------------------------------------------------------- loading


def load_task_file(path: str | os.PathLike[str]) -> list[Task]:
    """Read, validate and return the tasks of a YAML task file.

    Raises:
        TaskFileError: the file is missing or unreadable, is not YAML, or does not match the
            schema (unknown key, missing field, bad value, unknown MiniWoB++ task, duplicate
            id). The message names the file, the task (index and id) and the field, and lists
            every problem found.
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

    merged = _merge_defaults(data)
    try:
        task_file = TaskFile.model_validate(merged)
    except ValidationError as exc:
        raise _file_error(name, exc, merged, root) from None
    log.debug("task_file_loaded", path=name, tasks=len(task_file.tasks))
    return list(task_file.tasks)


def adhoc_task(url: str, goal: str, max_steps: int) -> WebTask:
    """Build the one-off web task of ``linewise run --url URL --goal TEXT``.

    Raises:
        ConfigError: the URL, goal or step budget is not valid.
    """
    try:
        return WebTask(id="adhoc", url=url, goal=goal, max_steps=max_steps)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{'-'.join(str(p) for p in err['loc']).replace('_', '-')}: "
            f"{_strip_prefix(err['msg'])}"
            for err in exc.errors()
        )
        raise ConfigError(problems) from None


# --------------------------------------------------------------------------- helpers


def _default_miniwob_id(data: Mapping[str, Any]) -> str | None:
    name, seed = data.get("miniwob"), data.get("seed")
    if isinstance(name, str) and isinstance(seed, int) and not isinstance(seed, bool):
        return f"miniwob.{name.strip()}.seed{seed}"
    return None


def _merge_defaults(data: Any) -> Any:
    """Return ``data`` with ``defaults`` copied into each task mapping that lacks the key."""
    if not isinstance(data, Mapping):
        return data
    defaults, tasks = data.get("defaults"), data.get("tasks")
    if not isinstance(defaults, Mapping) or not isinstance(tasks, list):
        return data
    merged_tasks = []
    for task in tasks:
        if isinstance(task, Mapping):
            accepted = _TASK_MODELS[_task_kind(task)].model_fields
            extra = {
                key: value
                for key, value in defaults.items()
                if key in accepted and key not in task and value is not None
            }
            task = {**task, **extra}
        merged_tasks.append(task)
    return {**data, "tasks": merged_tasks}


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
        # A MiniWoB++ task's id is derived from its name and seed: only report those.
        and not (err["type"] == "missing" and _tag(loc) == "miniwob" and loc[3:] == ("id",))
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
    if len(loc) > 2 and loc[0] == "tasks" and isinstance(loc[1], int) and loc[2] in _TASK_MODELS:
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
        model: type[BaseModel] | None = _TASK_MODELS.get(str(tag)) if tag else None
        if field[:1] == ("success",) and len(field) > 1:
            model = SuccessCheck
        return where, field, model
    if loc[:1] == ("defaults",):
        return "defaults", loc[1:], Defaults
    return "", loc, TaskFile


def _raw_id(raw: Any) -> str | None:
    if not isinstance(raw, Mapping):
        return None
    if isinstance(raw.get("id"), str | int) and str(raw["id"]).strip():
        return str(raw["id"]).strip()
    return _default_miniwob_id(raw) if "miniwob" in raw else None


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
