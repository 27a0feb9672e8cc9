"""Escalation: when the agent is stuck on a filtered view, show it more next step.

A filter remembers what it showed last step (:class:`ShownStep`). From the next
step's ``FilterInput`` it reads whether the agent got stuck on that view:

- ``noop``: the last action was ``noop()``;
- ``repeat``: the last action repeated the one before on an unchanged page;
- ``filter_miss``: the last action named an element the view did not show;
- ``action_error``: the last action failed and named an element;
- ``cannot_find``: the last thought says it cannot find or see something.

Each consecutive stuck step raises the level by one (a larger budget, then the whole
tree); a step that is not stuck brings it back to 0. The decision goes to the trace
as ``notes["escalation"]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import BaseModel

from linewise.agent.filters.base import FilterInput

__all__ = ["Escalation", "EscalationState", "ShownStep", "stuck_reasons"]

_CANNOT_FIND = re.compile(
    r"\b(can ?not|can't|couldn't|could not|unable to|don't|do not|doesn't|does not|"
    r"no longer)\s+(find|see|locate|spot)\b"
    r"|\bnot (visible|shown|present|in the (view|observation|page|tree))\b"
    r"|\b(is|are) (missing|hidden|omitted)\b|\bno (such|visible) (element|link|button)\b",
    re.IGNORECASE,
)


@dataclass
class ShownStep:
    """What a filter showed at one step: the page's lines and the bids in the view."""

    lines: list[str]
    shown_bids: set[str] = field(default_factory=set)


class EscalationState(BaseModel):
    level: int = 0
    """0: the normal view; 1: a larger one; 2 (``max_level``): the whole tree."""
    reasons: list[str] = []
    page_unchanged: bool = False


def stuck_reasons(observation: FilterInput, previous: ShownStep | None) -> list[str]:
    """Why the last step looks stuck on the view shown (empty: it does not)."""
    if previous is None or not observation.history:
        return []
    reasons: list[str] = []
    last = observation.history[-1]
    bids = last.bids
    if last.name == "noop":
        reasons.append("noop")
    unchanged = previous.lines == observation.lines
    if (len(observation.history) >= 2 and unchanged
            and last.text.strip() == observation.history[-2].text.strip()):
        reasons.append("repeat")
    if any(bid not in previous.shown_bids for bid in bids):
        reasons.append("filter_miss")
    if observation.last_action_error and bids:
        reasons.append("action_error")
    if observation.thoughts and _CANNOT_FIND.search(observation.thoughts[-1]):
        reasons.append("cannot_find")
    return reasons


class Escalation:
    """The escalation level of one episode, step by step."""

    def __init__(self, max_level: int = 2) -> None:
        self.max_level = max_level
        self.level = 0
        self.previous: ShownStep | None = None

    def update(self, observation: FilterInput) -> EscalationState:
        """This step's level, from how the last step went."""
        reasons = stuck_reasons(observation, self.previous)
        self.level = min(self.max_level, self.level + 1) if reasons else 0
        unchanged = self.previous is not None and self.previous.lines == observation.lines
        return EscalationState(level=self.level, reasons=reasons, page_unchanged=unchanged)

    def shown(self, lines: list[str], shown_bids: list[str]) -> None:
        """Remember what this step showed, for the next step's judgement."""
        self.previous = ShownStep(list(lines), set(shown_bids))
