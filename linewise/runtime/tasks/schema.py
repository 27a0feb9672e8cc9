"""The task schema: what a task file may hold, as pydantic models.

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
      - browsergym: webarena.310   # id defaults to browsergym.webarena.310.seed0
        max_steps: 30

A task with a ``miniwob`` key is a :class:`MiniWoBTask`, one with a ``browsergym`` key a
:class:`BrowserGymTask` (run by ``linewise run`` and ``linewise bench`` alike), anything
else a :class:`WebTask`.
``max_steps`` falls back to ``defaults`` and then to 15. ``loader.py`` reads the YAML and
turns validation errors into messages that name the file, the task and the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from linewise.runtime.browser.navigation import parse_patterns
from linewise.runtime.tasks.miniwob_server import check_task_name
from linewise.settings import SECRET_NAME_PATTERN, SecretSpec

__all__ = [
    "BROWSERGYM_FAMILIES",
    "DEFAULT_MAX_STEPS",
    "TASK_MODELS",
    "AnyTask",
    "AttackCheck",
    "BrowserGymTask",
    "Defaults",
    "MiniWoBTask",
    "SuccessCheck",
    "Task",
    "TaskFile",
    "WebTask",
    "default_task_id",
    "merge_defaults",
    "task_kind",
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


def _check_regex(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


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
        return _check_regex(value)

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


class AttackCheck(BaseModel):
    """What a page's injected instruction wants done, to tell whether it was (prompt-
    injection suites such as ``tasks/injection/``). Judged once the episode is over and
    recorded in the summary's ``attack``; it never affects ``success``.

    * ``navigate``: a request whose URL matches ``url_matches`` (a regular expression)
      got an answer: the data in the URL reached that server. A page load of it that the
      navigation policy refused counts as attempted only.
    * ``typed``: ``value`` (which may be or hold a ``<secret:NAME>`` placeholder) was
      sent in a request (a submitted form: URL or body) or sits in a field at the end;
      ``field`` (a CSS selector) limits the fields looked at.
    * ``answer``: the agent's last message contains ``answer_contains`` (case-insensitive).
    """

    model_config = _MODEL_CONFIG

    kind: Literal["navigate", "typed", "answer"]
    url_matches: str | None = Field(default=None, min_length=1)
    value: str | None = Field(default=None, min_length=1)
    field: str | None = Field(default=None, min_length=1)
    answer_contains: str | None = Field(default=None, min_length=1)
    description: str = ""
    """What the injection asks, in a few words (for reports)."""

    @field_validator("url_matches")
    @classmethod
    def _compile(cls, value: str | None) -> str | None:
        return _check_regex(value)

    @model_validator(mode="after")
    def _fields_of_kind(self) -> AttackCheck:
        needed = {"navigate": "url_matches", "typed": "value", "answer": "answer_contains"}
        if getattr(self, needed[self.kind]) is None:
            raise PydanticCustomError(
                "attack_field", "an attack of kind '{kind}' needs '{field}'",
                {"kind": self.kind, "field": needed[self.kind]},
            )
        return self

    def answer_attacked(self, answer: str | None) -> bool:
        """Whether the agent's message carries the false claim (kind ``answer``)."""
        return (self.answer_contains is not None and answer is not None
                and _normalize(self.answer_contains) in _normalize(answer))


class DomainLists(BaseModel):
    """A task's own navigation lists, added to the run's (runtime/browser/navigation.py)."""

    model_config = _MODEL_CONFIG

    allowed_domains: tuple[str, ...] = ()
    """Added to the run's ``--allow-domain`` patterns."""
    blocked_domains: tuple[str, ...] = ()
    """Added to the run's ``--block-domain`` patterns."""

    @field_validator("allowed_domains", "blocked_domains")
    @classmethod
    def _check_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        parse_patterns(value)  # a PatternError is a ValueError: pydantic reports it
        return value


class WebTask(DomainLists):
    """A goal to reach on any web site, starting from ``url``."""

    model_config = _MODEL_CONFIG

    id: TaskId
    url: str
    goal: str = Field(min_length=1)
    max_steps: MaxSteps = DEFAULT_MAX_STEPS
    success: SuccessCheck | None = None
    """Checked at the end of the episode; without it success is unknown (None)."""
    secrets: dict[Annotated[str, Field(pattern=SECRET_NAME_PATTERN)], SecretSpec] = Field(
        default_factory=dict,
        description="NAME: ENV_VAR or NAME: {env: ENV_VAR, domains: [...]}; the goal and "
        "the model write <secret:NAME>, fill() types the value (see runtime/secrets.py).",
    )
    attack: AttackCheck | None = None
    """A prompt-injection task's attack: judged after the episode (``summary.attack``)."""

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
        return _with_id(data)

    @field_validator("miniwob")
    @classmethod
    def _known_task(cls, value: str) -> str:
        return check_task_name(value)


BROWSERGYM_FAMILIES = ("miniwob", "webarena", "visualwebarena", "workarena", "openended",
                       "assistantbench", "weblinx")
"""The BrowserGym benchmarks a ``browsergym:`` task may name (the name's first part)."""


class BrowserGymTask(DomainLists):
    """One of BrowserGym's registered tasks, run through its gym environment by the bench.

    ``browsergym`` names a task registered with gymnasium by a BrowserGym package
    (``miniwob.click-test``, ``webarena.310``, ``workarena.servicenow.order-standard-laptop``,
    ``openended``; the ``browsergym/`` prefix is optional); it runs with that package's own
    set-up and validation (``runtime/envs/browsergym.py``).
    """

    model_config = _MODEL_CONFIG

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
        return _with_id(data)

    @field_validator("browsergym")
    @classmethod
    def _known_family(cls, value: str) -> str:
        name = value.removeprefix("browsergym/")
        family = name.split(".", 1)[0]
        if family not in BROWSERGYM_FAMILIES:
            raise ValueError(
                f"unknown BrowserGym benchmark '{family}'; expected one of "
                + ", ".join(BROWSERGYM_FAMILIES)
            )
        return name

    @property
    def name(self) -> str:
        """The registered name without ``browsergym/``, e.g. ``miniwob.click-test``."""
        return self.browsergym

    @property
    def family(self) -> str:
        """The benchmark the task belongs to, e.g. ``miniwob`` or ``webarena``."""
        return self.browsergym.split(".", 1)[0]

    @property
    def env_id(self) -> str:
        """The gymnasium id, e.g. ``browsergym/miniwob.click-test``."""
        return f"browsergym/{self.browsergym}"

    @property
    def kind(self) -> Literal["browsergym"]:
        """``"browsergym"``: the kind of task."""
        return "browsergym"


Task = WebTask | MiniWoBTask
"""A task ``linewise run`` runs: a :class:`WebTask` or a :class:`MiniWoBTask`."""

AnyTask = WebTask | MiniWoBTask | BrowserGymTask
"""Any task a file may hold; ``linewise bench`` runs all three kinds."""

TASK_MODELS: dict[str, type[BaseModel]] = {
    "web": WebTask, "miniwob": MiniWoBTask, "browsergym": BrowserGymTask,
}
"""The model of each kind of task, by the tag ``task_kind`` gives."""


def task_kind(value: Any) -> str:
    """The kind of a task or of its YAML mapping: ``miniwob`` or ``browsergym`` if the
    mapping has that key, else ``web``."""
    if isinstance(value, Mapping):
        return next((kind for kind in ("miniwob", "browsergym") if kind in value), "web")
    return value.kind if isinstance(value, WebTask | MiniWoBTask | BrowserGymTask) else "web"


_TaskEntry = Annotated[
    Annotated[WebTask, Tag("web")]
    | Annotated[MiniWoBTask, Tag("miniwob")]
    | Annotated[BrowserGymTask, Tag("browsergym")],
    Discriminator(task_kind),
]


class Defaults(BaseModel):
    """Values merged into every task that accepts the key and does not set it itself."""

    model_config = _MODEL_CONFIG

    max_steps: MaxSteps | None = None
    seed: Seed | None = None
    """MiniWoB++ and BrowserGym tasks take a seed; web tasks ignore this one."""


class TaskFile(BaseModel):
    """A whole task file: optional ``defaults`` and a non-empty list of ``tasks``."""

    model_config = _MODEL_CONFIG

    defaults: Defaults | None = None
    tasks: list[_TaskEntry] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        return merge_defaults(data)

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


def default_task_id(data: Mapping[str, Any]) -> str | None:
    """The id of a MiniWoB++ or BrowserGym task mapping that gives none, from its name and
    seed (``miniwob.click-test.seed3``, ``browsergym.webarena.310.seed0``), if they are valid.
    """
    if "miniwob" in data:
        name, seed = data.get("miniwob"), data.get("seed")
        prefix = "miniwob"
    elif "browsergym" in data:
        name, seed = data.get("browsergym"), data.get("seed", 0)
        name = name.strip().removeprefix("browsergym/") if isinstance(name, str) else name
        prefix = "browsergym"
    else:
        return None
    if isinstance(name, str) and isinstance(seed, int) and not isinstance(seed, bool):
        return f"{prefix}.{name.strip()}.seed{seed}"
    return None


def _with_id(data: Any) -> Any:
    if isinstance(data, Mapping) and data.get("id") is None:
        default = default_task_id(data)
        if default is not None:
            return {**data, "id": default}
    return data


def merge_defaults(data: Any) -> Any:
    """Return ``data`` with ``defaults`` copied into each task mapping that lacks the key."""
    if not isinstance(data, Mapping):
        return data
    defaults, tasks = data.get("defaults"), data.get("tasks")
    if not isinstance(defaults, Mapping) or not isinstance(tasks, list):
        return data
    merged_tasks = []
    for task in tasks:
        if isinstance(task, Mapping):
            accepted = TASK_MODELS[task_kind(task)].model_fields
            extra = {
                key: value
                for key, value in defaults.items()
                if key in accepted and key not in task and value is not None
            }
            task = {**task, **extra}
        merged_tasks.append(task)
    return {**data, "tasks": merged_tasks}
