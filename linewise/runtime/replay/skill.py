"""Skills: a program with parameters, induced from solved episodes of one kind of task.

A skill is what several solved episodes of one task template have in common, with the
values their goals gave (a user name, a date, a button's label) as parameters: the
login of MiniWoB++'s login-user is ``log_in(username, password)``, whatever seed set
the credentials. ``linewise skills build`` makes them (``apps/skills``); with
``--skills DIR`` the action model may call one, ``run_skill('login_user', {'username':
'ann', 'password': 'x'})``, and its steps are replayed with the arguments bound, with no
model call, until the skill ends or a step does not fit (control then goes back to the
model, told why).

A parameter stands in a step's text arguments and in its locators' names, texts, labels
and values as ``{{name}}``. A skill is offered only where its precondition holds: the
elements its first step needs, with the goal's values bound, are on the page, and no
element of a step is there in another role; and only to a goal that fits its goal
template.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from linewise.agent.action_parser import ParsedAction
from linewise.errors import ProgramError
from linewise.files import write_atomically
from linewise.locators import ORDINAL_PATTERN, TreeIndex, ordinal_number
from linewise.records import TargetLocator
from linewise.runtime.replay.program import Program, ProgramStep, read_versioned

SKILL_VERSION = 1
SKILL_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_PLACEHOLDER = re.compile(r"\{\{([a-z][a-z0-9_]*)\}\}")


def placeholder(name: str) -> str:
    return "{{" + name + "}}"


class SkillParameter(BaseModel):
    """One value a skill takes."""

    name: str = Field(pattern=SKILL_NAME.pattern)
    example: str = Field(default="", description="A value one of its episodes used.")
    kind: Literal["text", "ordinal"] = Field(
        default="text", description="text: stands in text and names as it is; ordinal: "
        "which of several equal elements (``2nd``, ``second``), and only an ordinal fits.")


class Skill(BaseModel):
    """A parameterised program, with its precondition and where it came from."""

    version: int = SKILL_VERSION
    name: str = Field(pattern=SKILL_NAME.pattern)
    doc: str = Field(description="One line: the goal template it was induced from.")
    goal_template: str = Field(
        description="The goal with each parameter's value replaced by {{name}}.")
    parameters: list[SkillParameter] = Field(default_factory=list)
    steps: list[ProgramStep] = Field(min_length=1)
    precondition: list[TargetLocator] = Field(
        default_factory=list, description="The elements the first step needs.")
    provenance: list[str] = Field(
        default_factory=list, description="The episode folders it was induced from.")

    def bind(self, arguments: dict[str, str]) -> Program:
        """The program of this skill with ``arguments`` in place of its parameters.

        Raises:
            ProgramError: an argument is missing or unknown.
        """
        names = {p.name for p in self.parameters}
        missing, unknown = names - set(arguments), set(arguments) - names
        if missing or unknown:
            expected = ", ".join(sorted(names)) or "none"
            raise ProgramError(f"skill {self.name}", f"takes {{{expected}}}; "
                               f"missing {sorted(missing)}, unknown {sorted(unknown)}")
        steps = [
            step.model_copy(update={
                "action": str(_bind_action(step.parsed(), arguments)),
                "targets": [_bind_locator(t, arguments) for t in step.targets],
                "state_after": [{k: _fill(v, arguments) for k, v in s.items()}
                                for s in step.state_after],
            })
            for step in self.steps
        ]
        return Program(source=f"skill {self.name}", task_id=self.name,
                       goal=_fill(self.goal_template, arguments), steps=steps)

    def holds(self, index: TreeIndex, arguments: dict[str, str]) -> bool:
        """Whether the precondition holds on the page ``index`` reads, for the
        ``arguments`` a goal gives: bound with them, every element of the precondition
        (the first step's) is there, found or found among several equal ones, and no
        step's element is on the page in another role (a radio where the skill checks a
        checkbox): the page is then of another task whose goals read alike, and the
        skill would fail part-way. An element a later step needs may be missing: earlier
        steps may show it. A first step that searches (``reveal``) needs only an
        element of its role."""
        try:
            bound = self.bind(arguments)
            needed = [_bind_locator(locator, arguments) for locator in self.precondition]
        except ProgramError:
            return False
        if any(index.resolve(target).reason == "changed_role"
               for step in bound.steps for target in step.targets):
            return False
        if bound.steps[0].reveal:  # a search for what the next step needs
            return all(index.has_role(locator.role) for locator in needed)
        return all(_found(index, locator) for locator in needed)

    def arguments_from(self, goal: str) -> dict[str, str] | None:
        """The arguments a goal of this skill's template gives, or None when the goal
        is not of its template."""
        pattern = re.escape(self.goal_template)
        for parameter in self.parameters:
            value = ".+?" if parameter.kind == "text" else f"(?i:{ORDINAL_PATTERN})"
            pattern = pattern.replace(re.escape(placeholder(parameter.name)),
                                      f"(?P<{parameter.name}>{value})", 1)
        match = re.fullmatch(pattern, goal.strip())
        return match.groupdict() if match is not None else None


def _found(index: TreeIndex, locator: TargetLocator) -> bool:
    found = index.resolve(locator)
    return found.bid is not None or found.reason == "several"


def _fill(text: str, arguments: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: arguments.get(m.group(1), m.group(0)), text)


def _bind_action(action: ParsedAction, arguments: dict[str, str]) -> ParsedAction:
    bound: dict[str, Any] = {}
    for key, value in action.arguments.items():
        if isinstance(value, str) and not key.endswith("bid"):
            value = _fill(value, arguments)
        elif isinstance(value, list):
            value = [_fill(v, arguments) if isinstance(v, str) else v for v in value]
        bound[key] = value
    return ParsedAction(name=action.name, arguments=bound)


def _bind_locator(locator: TargetLocator, arguments: dict[str, str]) -> TargetLocator:
    update: dict[str, Any] = {}
    if locator.ordinal_parameter is not None:
        number = ordinal_number(arguments.get(locator.ordinal_parameter, ""))
        if number is None:
            raise ProgramError("skill argument", f"{locator.ordinal_parameter} must be an "
                               f"ordinal (2nd, second), not "
                               f"{arguments.get(locator.ordinal_parameter)!r}")
        update["ordinal"] = number - 1
    return locator.model_copy(update={
        **update,
        "name": _fill(locator.name, arguments),
        "label": _fill(locator.label, arguments) if locator.label else locator.label,
        "text": _fill(locator.text, arguments) if locator.text else locator.text,
        "context": tuple(_fill(c, arguments) for c in locator.context),
        "value": _fill(locator.value, arguments) if locator.value else locator.value,
    })


# ------------------------------------------------------------------ files


def write_skill(skill: Skill, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{skill.name}.json"
    write_atomically(path, skill.model_dump_json(indent=2) + "\n")
    return path


def read_skill(path: Path) -> Skill:
    """A skill file.

    Raises:
        ProgramError: it is not a readable skill of this version.
    """
    return read_versioned(path, Skill, "skill", SKILL_VERSION)


class SkillLibrary:
    """The skills of a folder (``--skills DIR``), read once per run."""

    def __init__(self, skills: list[Skill]) -> None:
        self.skills = {skill.name: skill for skill in skills}

    @classmethod
    def load(cls, directory: Path) -> SkillLibrary:
        """Every ``*.json`` skill of ``directory``.

        Raises:
            ProgramError: the folder is missing or holds no skill, or a file is damaged.
        """
        if not directory.is_dir():
            raise ProgramError(str(directory), "is not a folder of skills")
        skills = [read_skill(path) for path in sorted(directory.glob("*.json"))]
        if not skills:
            raise ProgramError(str(directory), "holds no skill (linewise skills build)")
        return cls(skills)

    def offered(self, goal: str, lines: list[str], limit: int = 5) -> list[Skill]:
        """The skills whose goal template the goal fits (the task they were induced
        from, with other values) and whose precondition holds on this page, at most
        ``limit``. A skill of another task is not offered: what it does was only ever
        seen to solve its own template, and a small model offered it takes it."""
        fitting = [(skill, arguments) for skill in self.skills.values()
                   if (arguments := skill.arguments_from(goal)) is not None]
        if not fitting:
            return []
        index = TreeIndex(lines)
        return [skill for skill, arguments in fitting if skill.holds(index, arguments)][:limit]


def skills_for(directory: Path | None) -> SkillLibrary | None:
    """The skills of ``--skills DIR`` (None when unset), read once per folder version."""
    if directory is None:
        return None
    stamps = tuple((p.name, p.stat().st_mtime_ns) for p in sorted(directory.glob("*.json"))
                   ) if directory.is_dir() else ()
    return _library(directory, stamps)


@cache
def _library(directory: Path, _stamps: tuple[tuple[str, int], ...]) -> SkillLibrary:
    return SkillLibrary.load(directory)


def parse_skill_call(action: ParsedAction) -> tuple[str, dict[str, str]]:
    """The skill's name and arguments of a ``run_skill`` call."""
    name = str(action.arguments.get("name", ""))
    raw = action.arguments.get("arguments") or {}
    return name, {str(key): str(value) for key, value in dict(raw).items()}

