"""What the viewer's pages read: an index row per episode, a light outline of every step
of an episode, and one step's full detail (loaded only when that step is shown).

These are built from the trace records alone, the same way for the files written to
disk and for the live answers of ``linewise view --serve``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from linewise.agent.action_parser import parse_action
from linewise.apps.viewer.discover import EpisodeFolder, ResultRow, attempt_of
from linewise.apps.viewer.paths import episode_key, episode_page, from_view
from linewise.axtree import bids_in
from linewise.errors import ActionParseError, DamagedTraceError
from linewise.locators import describe
from linewise.records import (
    EpisodeSummary,
    LLMCall,
    ManualStep,
    Operator,
    Outcome,
    ReplayMode,
    ReplayStep,
    ReplaySummary,
    StepRecord,
    TargetBox,
)
from linewise.runtime.trace import read_summary


class StepOutline(BaseModel):
    """One step in the episode's timeline: what was done, not what was seen."""

    index: int
    url: str
    title: str
    action: str | None
    think: str | None
    error: str | None
    reward: float
    done: bool
    kept_lines: int
    total_lines: int
    tokens: int
    misses: int
    screenshot: str | None = Field(description="Relative to view/.")
    target_box: TargetBox | None
    screenshot_clip: TargetBox | None = Field(
        default=None, description="The part of the viewport the screenshot shows: the "
        "CSS pixels its width stands for (an image may be shot at another scale).")
    operator: Operator | None = None
    hook_replaced: bool = Field(
        default=False, description="A hook's code ran another action than the model's.")
    replay: ReplayMode | None = Field(
        default=None, description="How a replay's step came about: replayed or healed.")


class EpisodeOutline(BaseModel):
    """An episode page's data: the summary and every step's outline."""

    key: str
    rel: str
    summary: EpisodeSummary
    steps: list[StepOutline]
    problems: list[str] = Field(
        default_factory=list, description="What of the trace could not be read (skipped)."
    )
    attempt_of: str | None = Field(
        default=None, description="For an earlier attempt a bench set aside before it "
        "ran the episode again: the episode's page, relative to view/.")


class LineSets(BaseModel):
    """The AXTree lines by what the filter did with them (1-based, inclusive runs)."""

    known: bool = Field(description="False for old traces that recorded only counts.")
    kept: list[tuple[int, int]]
    context: list[int]
    guard: list[int]
    retrieved: list[tuple[int, int]]
    target_bid: str | None
    misses: list[str] = Field(description="Bids the action used that the tree had and "
                              "the filter hid.")
    absent: list[str] = Field(default_factory=list, description="Bids the action used "
                              "that no line of the tree had: not the filter's doing.")


class TargetView(BaseModel):
    """An element the step's action named, as a person reads its locator."""

    bid: str = Field(description="Its bid on this step's page.")
    description: str = Field(description="``locators.describe`` of its locator.")
    recorded_bid: str | None = Field(
        default=None, description="For a replayed step: the bid the recording named, "
        "whose locator found this element.")


def target_views(record: StepRecord) -> list[TargetView]:
    recorded = ({found: bid for bid, found in record.replay.resolved.items()}
                if record.replay is not None else {})
    return [TargetView(bid=t.bid, description=describe(t), recorded_bid=recorded.get(t.bid))
            for t in record.targets]


class StepDetail(BaseModel):
    """Everything the episode page shows for one step."""

    index: int
    url: str
    title: str
    axtree: str = Field(description="Numbered lines, ``12|\\t[34] button 'OK'``.")
    observation: str | None = Field(description="The filtered view; None when it was the "
                                    "whole tree.")
    lines: LineSets
    think: str | None
    action: str | None
    action_raw: str | None
    parse_error: str | None
    action_error: str | None
    last_action_error: str | None
    repeat_escape: str | None
    reward: float
    done: bool
    focused_bid: str
    filter: dict[str, Any]
    llm_calls: list[LLMCall]
    timings: dict[str, float]
    hook_notes: dict[str, Any]
    screenshot: str | None
    target_box: TargetBox | None
    operator: Operator | None = None
    model_action: str | None = None
    hook_replaced: bool = False
    manual: ManualStep | None = None
    manual_after_screenshot: str | None = Field(
        default=None, description="The page after a person's work by hand, relative to view/."
    )
    replay: ReplayStep | None = Field(
        default=None, description="What a replay did at this step (replayed or healed).")
    targets: list[TargetView] = Field(default_factory=list)


class AttemptRef(BaseModel):
    """An earlier attempt of an episode, set aside when the bench ran it again."""

    rel: str
    page: str = Field(description="The attempt's page, relative to view/.")
    status: str
    outcome: Outcome
    termination: str
    infra_kind: str | None
    error: str | None
    started_at: datetime


def attempt_ref(folder: EpisodeFolder, summary: EpisodeSummary) -> AttemptRef:
    return AttemptRef(rel=folder.rel, page=episode_page(folder.rel), status=summary.status,
                      outcome=summary.outcome, termination=summary.termination,
                      infra_kind=summary.infra_kind, error=summary.error,
                      started_at=summary.started_at)


class NotRunRow(BaseModel):
    """An episode a run or bench set out to run that has no folder of its own: never
    started, or set aside to run again (its attempts)."""

    task_id: str
    filter: str = ""
    seed: int | None = None
    attempts: list[AttemptRef] = Field(default_factory=list)
    error: str | None = Field(
        default=None, description="The error of a results line whose episode left no "
        "folder (it failed before its trace began).")


class IndexRow(BaseModel):
    """One episode in the run or bench index (its last attempt, for a bench that ran it
    more than once: ``attempts`` are the earlier ones)."""

    key: str
    rel: str
    page: str = Field(description="The episode page, relative to view/.")
    task_id: str
    filter: str
    seed: int | None
    status: str
    termination: str
    success: bool | None
    outcome: Outcome
    agent_success: bool | None
    assisted_steps: int
    hook_steps: int = Field(default=0, description="Steps whose action a hook's code "
                            "replaced (outcome 'hooked' when any).")
    reward: float
    steps: int
    tokens: int
    wall_s: float
    error_kind: str | None
    error: str | None
    answer: str | None = Field(default=None, description="The agent's last message.")
    llm_calls: int = 0
    replay: ReplaySummary | None = None
    action_errors: int = Field(default=0, description="Steps whose action failed.")
    parse_errors: int = Field(default=0, description="Steps with no usable action.")
    started_at: datetime
    problems: int = Field(default=0, description="Damaged parts of the trace.")
    attempts: list[AttemptRef] = Field(
        default_factory=list, description="Earlier attempts, oldest first.")


def target_bid(action: str | None) -> str | None:
    if not action:
        return None
    try:
        bids = parse_action(action).bids
    except ActionParseError:
        return None
    return bids[0] if bids else None


def step_outline(rel: str, record: StepRecord) -> StepOutline:
    return StepOutline(
        index=record.index,
        url=record.url,
        title=record.title,
        action=record.action or record.action_raw,
        think=record.think,
        error=record.action_error or record.parse_error,
        reward=record.reward,
        done=record.done,
        kept_lines=record.filter_result.kept_lines or record.axtree_lines,
        total_lines=record.axtree_lines,
        tokens=sum(c.prompt_tokens + c.completion_tokens for c in record.llm_calls),
        misses=len(misses_and_absent(record)[0]),
        screenshot=from_view(rel, record.screenshot) if record.screenshot else None,
        target_box=record.target_box,
        screenshot_clip=record.screenshot_clip,
        operator=record.operator,
        hook_replaced=record.hook_replaced,
        replay=record.replay.mode if record.replay is not None else None,
    )


def episode_outline(folder: EpisodeFolder, summary: EpisodeSummary,
                    steps: list[StepRecord], problems: list[str]) -> EpisodeOutline:
    final = attempt_of(folder.rel)
    return EpisodeOutline(
        key=episode_key(folder.rel), rel=folder.rel, summary=summary,
        steps=[step_outline(folder.rel, s) for s in steps], problems=problems,
        attempt_of=episode_page(final) if final is not None else None,
    )


def summary_of(folder: EpisodeFolder) -> tuple[EpisodeSummary, list[str]]:
    """The episode's summary, with what was wrong with it: a damaged summary.json is
    replaced by a stand-in that says so, so that the steps can still be shown."""
    try:
        return read_summary(folder.path), []
    except DamagedTraceError as exc:
        name = folder.path.resolve().name
        stand_in = EpisodeSummary(episode_id="", task_id=name, status="failed",
                                  termination="error", error=str(exc))
        return stand_in, [str(exc)]


def misses_and_absent(record: StepRecord) -> tuple[list[str], list[str]]:
    """The filter's misses, and the bids the action named that were in no line of the
    tree. Traces written before ``absent_bids`` counted those as misses: the tree
    itself says which were there to hide."""
    misses = record.filter_result.misses
    if not misses:
        return [], record.absent_bids
    in_tree = set(bids_in(record.tree_lines()))
    absent = [bid for bid in misses if bid not in in_tree]
    return ([bid for bid in misses if bid in in_tree],
            list(dict.fromkeys([*record.absent_bids, *absent])))


def line_sets(record: StepRecord) -> LineSets:
    result = record.filter_result
    total = record.axtree_lines
    kept, known = result.kept_ranges, True
    if not kept and total:
        if result.kept_lines in (0, total):
            kept = [(1, total)]
        else:  # a trace from before kept_ranges: the retriever's ranges approximate it
            kept, known = result.ranges, False
    guard = result.notes.get("guard_added_lines", [])
    misses, absent = misses_and_absent(record)
    return LineSets(
        known=known,
        kept=kept,
        context=result.context_lines,
        guard=[n for n in guard if isinstance(n, int)] if isinstance(guard, list) else [],
        retrieved=result.ranges,
        target_bid=target_bid(record.action),
        misses=misses,
        absent=absent,
    )


def step_detail(rel: str, record: StepRecord) -> StepDetail:
    result = record.filter_result
    whole = result.kept_lines in (0, record.axtree_lines) and not result.context_lines
    return StepDetail(
        index=record.index,
        url=record.url,
        title=record.title,
        axtree=record.axtree,
        observation=None if whole else record.observation,
        lines=line_sets(record),
        think=record.think,
        action=record.action,
        action_raw=record.action_raw,
        parse_error=record.parse_error,
        action_error=record.action_error,
        last_action_error=record.last_action_error,
        repeat_escape=record.repeat_escape,
        reward=record.reward,
        done=record.done,
        focused_bid=record.focused_bid,
        filter=result.model_dump(mode="json", exclude={"kept_ranges", "context_lines"}),
        llm_calls=record.llm_calls,
        timings=record.timings.model_dump(),
        hook_notes=record.hook_notes,
        screenshot=from_view(rel, record.screenshot) if record.screenshot else None,
        target_box=record.target_box,
        operator=record.operator,
        model_action=record.model_action,
        hook_replaced=record.hook_replaced,
        manual=record.manual,
        manual_after_screenshot=(
            from_view(rel, record.manual.after.screenshot)
            if record.manual is not None and record.manual.after.screenshot else None
        ),
        replay=record.replay,
        targets=target_views(record),
    )


def error_kind(summary: EpisodeSummary, row: ResultRow | None) -> str | None:
    """The bench's classification when there is one, else how a failed episode ended."""
    if row is not None and row.error_kind:
        return row.error_kind
    return summary.termination if summary.status == "failed" else None


def index_row(folder: EpisodeFolder, summary: EpisodeSummary, row: ResultRow | None,
              problems: int = 0, steps: list[StepRecord] | None = None) -> IndexRow:
    """``steps``: the steps written so far, for an episode still running (its summary
    counts no step and no token until it ends)."""
    return IndexRow(
        key=episode_key(folder.rel),
        rel=folder.rel,
        page=episode_page(folder.rel),
        task_id=summary.task_id,
        filter=summary.filter,
        seed=row.seed if row is not None else None,
        status=summary.status,
        termination=summary.termination,
        success=summary.success,
        outcome=summary.outcome,
        agent_success=summary.agent_success,
        assisted_steps=summary.assisted_steps,
        hook_steps=summary.hook_steps,
        reward=summary.reward,
        steps=summary.n_steps if steps is None else len(steps),
        tokens=summary.tokens.total if steps is None else steps_tokens(steps),
        wall_s=summary.time.wall_s,
        error_kind=error_kind(summary, row),
        error=summary.error,
        answer=summary.answer,
        llm_calls=(summary.tokens.llm_calls if steps is None
                   else sum(len(s.llm_calls) for s in steps)),
        replay=summary.replay,
        action_errors=summary.action_errors,
        parse_errors=summary.parse_errors,
        started_at=summary.started_at,
        problems=problems,
    )


def steps_tokens(steps: list[StepRecord]) -> int:
    """The model tokens of ``steps`` (what the summary's total will be once they end)."""
    return sum(c.prompt_tokens + c.completion_tokens for s in steps for c in s.llm_calls)


class LiveRow(BaseModel):
    """What ``--serve``'s index re-reads of an episode every few seconds."""

    status: str
    steps: int
    tokens: int


class LiveIndex(BaseModel):
    """``view/data/live.json``: the little an index page polls while a folder is written
    to, instead of the whole index; a key or status it has not seen makes it load the
    index again."""

    running: bool = Field(description="Whether anything in the folder is still being "
                          "written: an episode running, or a bench run with no end yet.")
    episodes: dict[str, LiveRow] = Field(description="By episode key.")
    not_run: int = Field(description="Planned episodes with no folder yet.")
