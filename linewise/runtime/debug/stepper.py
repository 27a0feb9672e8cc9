"""The step-through debugger: while the run is paused, a person decides every action.

``StepThroughHooks`` attaches to the step loop. Before each action of a paused run it
draws a box around the action's target in the browser, hands a ``PendingStep`` to an
``Operator`` (the terminal prompt of ``linewise run --step``, ``cli/step_prompt.py``)
and carries out the ``Choice``: run the model's action, run another, skip it, let the
person work in the browser by hand, go on without pausing, or quit. The decision is
recorded in the step (``StepRecord.operator``, the model's own action in
``model_action``, a manual step's page before and after in ``manual``).

The run is paused from the start with ``--step``; otherwise ``pause()`` (a headed run's
first Ctrl+C) pauses it before the next action. Once the run's ``stop`` event is set
(the next Ctrl+C), a waiting prompt gives up and the episode ends ``user_stopped``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

import structlog

from linewise.agent.action_parser import ParsedAction
from linewise.axtree import bid_of, parse_line
from linewise.records import ManualStep, Operator, PageState, TargetBox
from linewise.runtime.debug.overlay import hide_target, show_target
from linewise.runtime.episode import StepContext, StepHooks

log = structlog.get_logger(__name__)

T = TypeVar("T")

ChoiceKind = Literal["run", "override", "skip", "manual", "continue", "quit"]


@dataclass(frozen=True)
class Choice:
    """What the person decided; ``action`` is the one to run instead (``override``)."""

    kind: ChoiceKind
    action: ParsedAction | None = None


@dataclass(frozen=True)
class Target:
    """The element the proposed action names, as the observation shows it."""

    bid: str
    role: str
    name: str | None
    line: int | None
    """Its 1-based line in the full tree; None when no line of the tree has this bid."""
    shown: bool
    """The filtered view showed it to the model."""
    box: TargetBox | None
    """Where it was drawn; None when it could not be measured (or nothing draws)."""


@dataclass(frozen=True)
class PendingStep:
    """What the person sees before deciding."""

    index: int
    goal: str
    url: str
    title: str
    think: str | None
    action: ParsedAction | None
    """The model's action; None when its answer never parsed."""
    action_text: str | None
    parse_error: str | None
    target: Target | None
    kept_lines: int
    total_lines: int
    filter: str
    full_tree: str
    """Every line of the page's tree, numbered."""
    filtered_view: str
    """The text the model was shown."""


class StepOperator(Protocol):
    """The person at the prompt."""

    def waiting(self, index: int) -> None:
        """Step ``index``'s page is read and the model is being asked: a model on a CPU
        can take minutes, and the person should know the run is not stuck."""
        ...

    async def choose(self, pending: PendingStep) -> Choice:
        """Their decision on the pending step (invalid input is theirs to ask again)."""
        ...

    async def hand_back(self, pending: PendingStep) -> None:
        """Returns when the person, done working in the browser, gives control back."""
        ...


MANUAL_SCREENSHOT = "screenshots/step-{index:03d}-manual-after.png"
"""Where a manual step's page after the person's work is saved (episode-relative)."""


class StepThroughHooks(StepHooks):
    """Asks ``operator`` before every action while paused (from the start if
    ``paused``); ``stop`` is the run's stop event (set on quit, watched while waiting)."""

    def __init__(
        self, operator: StepOperator, *, paused: bool = True, stop: asyncio.Event | None = None
    ) -> None:
        self.operator = operator
        self.paused = asyncio.Event()
        """Set while the run stops before every action (``--step``, or after a pause)."""
        if paused:
            self.paused.set()
        self.stop = stop if stop is not None else asyncio.Event()

    def pause(self) -> None:
        """Stop before the next action and ask."""
        self.paused.set()

    async def before_observe(self, step: StepContext) -> None:
        # The box is removed after every prompt already; this also covers a prompt cut
        # short by an error, so that no observation can ever contain it.
        await hide_target(step.env)

    async def after_filter(self, step: StepContext) -> None:
        if self.paused.is_set() and not self.stop.is_set():
            self.operator.waiting(step.index)

    async def before_act(self, step: StepContext) -> None:
        if not self.paused.is_set():
            return
        if self.stop.is_set():
            self._record(step, "stopped", None)
            return
        pending = await self._pending(step)
        try:
            choice = await self._until_stopped(self.operator.choose(pending))
        finally:
            await hide_target(step.env)
        if choice is None or choice.kind == "quit":
            self.stop.set()
            self._record(step, "stopped", None)
        elif choice.kind == "run":
            self._record(step, "approved", step.action)
        elif choice.kind == "continue":
            self.paused.clear()
            self._record(step, "approved", step.action)
        elif choice.kind == "override":
            self._record(step, "overridden", choice.action)
        elif choice.kind == "skip":
            self._record(step, "skipped", None)
        else:
            await self._work_by_hand(step, pending)

    @staticmethod
    def _record(step: StepContext, operator: Operator, action: ParsedAction | None) -> None:
        step.operator, step.action = operator, action
        log.info("operator", step=step.index, decision=operator,
                 action=str(action) if action else None)

    async def _pending(self, step: StepContext) -> PendingStep:
        obs, filtered, decision = step.observation, step.filtered, step.decision
        assert obs is not None and filtered is not None and decision is not None
        target = None
        if step.action is not None and step.action.bids:
            bid = step.action.bids[0]
            box = await show_target(step.env, step.action)
            number = next((n for n, line in enumerate(obs.lines, 1) if bid_of(line) == bid),
                          None)
            parsed = parse_line(obs.lines[number - 1]) if number is not None else None
            target = Target(
                bid=bid, role=parsed.role if parsed else "", name=parsed.name if parsed else None,
                line=number, shown=bid in filtered.shown_bids, box=box,
            )
        return PendingStep(
            index=step.index, goal=step.goal, url=obs.url, title=obs.title, think=decision.think,
            action=step.action, action_text=decision.action_text,
            parse_error=decision.error if decision.action is None else None, target=target,
            kept_lines=len(filtered.kept_lines), total_lines=len(obs.lines),
            filter=filtered.name, full_tree=obs.numbered, filtered_view=filtered.text,
        )

    async def _work_by_hand(self, step: StepContext, pending: PendingStep) -> None:
        """Let the person act in the browser, then record the page as they left it."""
        obs = step.observation
        assert obs is not None and step.env is not None
        before = PageState(url=obs.url, title=obs.title, axtree_lines=len(obs.lines))
        self._record(step, "manual", None)
        await self._until_stopped(self.operator.hand_back(pending))
        await step.env.page_changed()
        after = await step.env.observe(screenshot=True)
        screenshot = None
        if after.screenshot_png and step.directory is not None:
            screenshot = MANUAL_SCREENSHOT.format(index=step.index)
            path = step.directory / screenshot
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(after.screenshot_png)
        step.manual = ManualStep(before=before, after=PageState(
            url=after.url, title=after.title, axtree_lines=len(after.lines),
            screenshot=screenshot,
        ))

    async def _until_stopped(self, work: Awaitable[T]) -> T | None:
        """``work``'s result, or None if the run's stop event is set first."""
        job = asyncio.ensure_future(work)
        stopped = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({job, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (job, stopped):
                if not pending.done():
                    pending.cancel()
            await asyncio.gather(job, stopped, return_exceptions=True)
        if job.cancelled():
            return None
        return job.result()
