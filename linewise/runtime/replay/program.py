"""Programs: a solved episode's actions, as something linewise can run again.

A program is the list of actions an episode ran, each with what a replay needs to run it
on a fresh load of the page without a model: a locator of every element the action
named (``linewise/locators.py``; a bid is only valid in the tree it came from), the
thought that led to it (the step's intent, shown to the model if the step must be
healed), and the effect the recording saw (where the page went, how the element's state
changed), which the replay checks.

Programs come from traces: an episode folder, a run or bench folder (its successful
episodes), a pruned dataset (``linewise prune``: each trajectory's kept steps), or a
program file written by ``linewise replay --update``. Traces are redacted when they are
written, so a program holds ``<secret:NAME>`` where a secret was typed, never a value.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from linewise.agent.action_parser import ParsedAction, parse_action
from linewise.errors import ActionParseError, DamagedTraceError, ProgramError
from linewise.files import write_atomically
from linewise.locators import element_state, locate, resolve
from linewise.records import EpisodeSummary, StepRecord, TargetLocator
from linewise.runtime.tasks.schema import AnyTask, BrowserGymTask, MiniWoBTask, WebTask
from linewise.runtime.trace import read_steps_checked, read_summary

_Model = TypeVar("_Model", bound=BaseModel)

PROGRAM_VERSION = 1
PROGRAM_FILE = "program.json"

SKIPPED_FOLDERS = frozenset({"_incomplete", "screenshots", "downloads", "graphs"})
"""Never searched for episodes: set-aside partial episodes and episodes' own folders."""

class ProgramStep(BaseModel):
    """One recorded action and what a replay needs to run it again."""

    index: int = Field(description="The recorded step's index in its episode.")
    action: str = Field(description="The action as it ran, with the recorded bids.")
    thought: str | None = Field(default=None, description="Why the agent took it.")
    targets: list[TargetLocator] = Field(
        default_factory=list, description="A locator of each element the action names, "
        "in the order of its bids.")
    url: str = Field(default="", description="The page's URL when the action ran.")
    url_after: str | None = Field(
        default=None, description="The page's URL after it, when the action moved the "
        "page (a replay checks it went to the same place).")
    state_after: list[dict[str, str]] = Field(
        default_factory=list, description="For each target, the state properties the "
        "action changed and their values after it (a replay checks them).")
    reveal: bool = Field(
        default=False, description="A search, not one click: the step uncovers the next "
        "step's elements by clicking controls of its target's role (tabs, sections), one "
        "after another in page order, until those elements are on the page; skipped when "
        "they already are. Skills induce it from episodes that opened other tabs.")

    def parsed(self) -> ParsedAction:
        return parse_action(self.action)


class Program(BaseModel):
    """A task and the recorded actions that solved it."""

    version: int = PROGRAM_VERSION
    source: str = Field(description="Where it came from: an episode folder or a file.")
    task: dict[str, Any] | None = Field(
        default=None, description="The task's definition (its task-file entry).")
    task_id: str
    goal: str
    start_url: str = ""
    episode_id: str = ""
    steps: list[ProgramStep]

    def make_task(self) -> AnyTask:
        """The task to run the program on: its recorded definition, or a web task at
        the start URL with the goal for a trace written before tasks were recorded."""
        spec = self.task
        if spec is None:
            if not self.start_url:
                raise ProgramError(self.source, "the trace records neither its task nor "
                                   "its start URL")
            spec = {"id": self.task_id, "url": self.start_url, "goal": self.goal}
        try:
            return TypeAdapter(_task_model(spec)).validate_python(spec)
        except ValidationError as exc:
            first = str(exc).splitlines()
            raise ProgramError(self.source, f"its task is not valid ({first[0]})") from None


def _task_model(spec: dict[str, Any]) -> type[AnyTask]:
    if "miniwob" in spec:
        return MiniWoBTask
    if "browsergym" in spec:
        return BrowserGymTask
    return WebTask


def task_spec(task: AnyTask) -> dict[str, Any]:
    """A task's definition as a task file would hold it (secrets by variable name)."""
    return task.model_dump(mode="json", exclude_defaults=True)


def locators_of(step: StepRecord, lines: Sequence[str] | None = None) -> list[TargetLocator]:
    """The locators of the elements a recorded step's action named, read again from the
    step's recorded tree; the recorded ones where the tree does not hold every element
    (a trace that kept no tree).

    The tree is what the recorded locators were read from: read again with this
    version's rules, it gives what this version's resolver expects, where a locator an
    older version recorded may lack what now identifies an element (the words inside an
    unnamed one). A bid in no line of the tree, in a trace with no recorded locators,
    gives no locator (the list is then shorter)."""
    if step.action is None:
        return list(step.targets)
    try:
        bids = parse_action(step.action).bids
    except ActionParseError:
        return list(step.targets)
    tree = step.tree_lines() if lines is None else lines
    derived = [found for bid in bids if (found := locate(tree, bid)) is not None]
    if step.targets and len(derived) != len(bids):
        return list(step.targets)
    return derived


def program_from_episode(directory: Path, kept: Sequence[int] | None = None) -> Program:
    """The program of the episode in ``directory``: every step whose action ran without
    an error (``kept``: only these recorded steps, as a pruned trajectory keeps them),
    ``noop`` left out.

    Raises:
        ProgramError: the folder holds no readable episode, or no step to replay.
    """
    try:
        summary = read_summary(directory)
        read = read_steps_checked(directory)
    except (OSError, DamagedTraceError) as exc:
        raise ProgramError(str(directory), f"not a readable episode ({exc})") from None
    records = read.records
    wanted = set(kept) if kept is not None else None
    steps: list[ProgramStep] = []
    for position, record in enumerate(records):
        if wanted is not None and record.index not in wanted:
            continue
        if (record.action is None or record.action_error is not None
                or record.operator in ("skipped", "manual")):
            continue
        try:
            action = parse_action(record.action)
        except ActionParseError:
            continue
        if not action.spec.replayed:  # it changes nothing a later step relies on
            continue
        lines = record.tree_lines()
        targets = locators_of(record, lines)
        if len(targets) != len(action.bids):
            continue  # an element the tree never had: nothing to find again
        after = records[position + 1] if position + 1 < len(records) else None
        steps.append(ProgramStep(
            index=record.index, action=record.action, thought=record.think,
            targets=targets, url=record.url,
            url_after=after.url if after is not None and after.url != record.url else None,
            state_after=_state_changes(targets, lines, after),
        ))
    if not steps:
        raise ProgramError(str(directory), "the episode holds no action to replay")
    return _program(summary, str(directory), steps)


def _program(summary: EpisodeSummary, source: str, steps: list[ProgramStep]) -> Program:
    return Program(source=source, task=summary.task, task_id=summary.task_id,
                   goal=summary.goal, start_url=summary.start_url,
                   episode_id=summary.episode_id, steps=steps)


def _state_changes(targets: Sequence[TargetLocator], lines: Sequence[str],
                   after: StepRecord | None) -> list[dict[str, str]]:
    """For each target, the state properties that differ on the next recorded page,
    with their values there (where the element is found again); a masked value is no
    effect to check."""
    if after is None:
        return [{} for _ in targets]
    later = after.tree_lines()
    changes: list[dict[str, str]] = []
    for target in targets:
        found = resolve(target, later).bid
        if found is None:
            changes.append({})
            continue
        before = element_state(lines, target.bid)
        now = element_state(later, found)
        changes.append({key: value for key, value in now.items()
                        if before.get(key) != value and not _masked(value)})
    return changes


def _masked(value: str) -> bool:
    """A password field's value as the tree shows it (``•••``): its length is the only
    thing it says, and another run's value has another."""
    return bool(value) and set(value) <= {"•", "*", "●"}


# ------------------------------------------------------------------ reading and writing


def read_program_file(path: Path) -> Program:
    """A program file (``program.json``).

    Raises:
        ProgramError: it is not valid UTF-8 JSON of a program of this version.
    """
    return read_versioned(path, Program, "program", PROGRAM_VERSION)


def read_versioned(path: Path, model: type[_Model], kind: str, version: int) -> _Model:
    """A JSON file of ``kind`` (a program, a skill) at ``version``, every step's action
    parsed and matched with its locators.

    Raises:
        ProgramError: unreadable, not UTF-8 JSON, another version, or not valid.
    """
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ProgramError(str(path), f"cannot be read ({exc.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ProgramError(str(path), f"is not a JSON {kind} ({exc})") from None
    if not isinstance(data, dict) or data.get("version") != version:
        found = data.get("version") if isinstance(data, dict) else None
        raise ProgramError(str(path), f"is not a {kind} of version {version} "
                           f"(version {found!r})")
    try:
        value = model.model_validate(data)
    except (ValidationError, RecursionError) as exc:
        first = str(exc).splitlines()
        raise ProgramError(str(path), f"is not a valid {kind} ({first[0]})") from None
    for step in getattr(value, "steps", []):
        try:
            action = step.parsed()
        except ActionParseError as exc:
            raise ProgramError(str(path), f"step {step.index}: {exc}") from None
        if len(action.bids) != len(step.targets):
            raise ProgramError(str(path), f"step {step.index}: {len(action.bids)} elements "
                               f"named and {len(step.targets)} locators")
    return value


def write_program_file(program: Program, path: Path) -> None:
    """Write ``program`` to ``path`` whole or not at all (a temporary file renamed)."""
    write_atomically(path, program.model_dump_json(indent=2) + "\n")


def load_programs(path: str | os.PathLike[str]) -> list[Program]:
    """Every program ``path`` holds: a program file, an episode folder, a run or bench
    folder (each successful episode under it), or a pruned dataset (a folder with
    ``pruned.jsonl``, or the file: each trajectory's kept steps).

    Raises:
        ProgramError: nothing there can be replayed, or a file is damaged.
    """
    where = Path(path)
    if not where.exists():
        raise ProgramError(str(where), "does not exist")
    if where.is_file():
        if where.suffix == ".jsonl":
            return list(_pruned_programs(where))
        return [read_program_file(where)]
    if (where / PROGRAM_FILE).is_file():
        return [read_program_file(where / PROGRAM_FILE)]
    if (where / "pruned.jsonl").is_file():
        return list(_pruned_programs(where / "pruned.jsonl"))
    if (where / "summary.json").is_file():
        return [program_from_episode(where)]
    programs = []
    for episode in sorted(_episode_folders(where)):
        try:
            if read_summary(episode).success:
                programs.append(program_from_episode(episode))
        except (OSError, DamagedTraceError, ProgramError):
            continue  # a run folder's unreadable or unreplayable episodes are not programs
    if not programs:
        raise ProgramError(str(where), "holds no successful episode with actions to replay")
    return programs


def _episode_folders(root: Path) -> Iterator[Path]:
    for summary in root.rglob("summary.json"):
        folder = summary.parent
        if not SKIPPED_FOLDERS.intersection(folder.relative_to(root).parts):
            yield folder


def _pruned_programs(path: Path) -> Iterator[Program]:
    """The programs of a pruned dataset: one per line, the kept steps of its episode."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProgramError(str(path), f"cannot be read ({exc})") from None
    found = False
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            metadata = json.loads(line)["metadata"]
            episode = Path(metadata["run"]) / metadata["episode"]
            kept = [int(index) for index in metadata["kept_steps"]]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, RecursionError) as exc:
            raise ProgramError(f"{path}:{number}", f"is not a pruned trajectory ({exc!r})"
                               ) from None
        if not episode.is_absolute() and not episode.exists():
            episode = path.parent / episode
        found = True
        yield program_from_episode(episode, kept)
    if not found:
        raise ProgramError(str(path), "holds no pruned trajectory")
