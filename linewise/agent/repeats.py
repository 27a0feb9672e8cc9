"""Which answers repeat what already changed nothing on the page.

Small models at temperature 0 loop: the same call step after step, or two calls on one
element in turn (``focus('617')``, ``click('617')``, ``focus('617')``…; hovering and
clicking one heading). A call is *futile* when the page has not changed since the same
call was made on it: the steps since the page last changed are its *unchanged run*.

Escaping a futile answer under a grammar forbids every call of that run, and when a
click on an element changed nothing, every pointer action on it too: a focus or hover
does less than the click that already did nothing.

A call is *cycled* when the page is one it was on before, changed since and came back
to, the same call was made on it then, and the last step that changed the page was
itself such a call: made again, it goes round the same loop a second time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import ActionSet
from linewise.agent.history import PastStep

_CLICKS = ("click", "dblclick")


def unchanged_run(history: Sequence[PastStep], page_key: str) -> list[PastStep]:
    """The latest steps taken on the page as it is now (``page_key``), oldest first."""
    if not page_key:
        return []
    run: list[PastStep] = []
    for step in reversed(history):
        if step.page_key != page_key:
            break
        run.append(step)
    return run[::-1]


def futile_calls(history: Sequence[PastStep], page_key: str) -> list[ParsedAction]:
    """The calls already made on the page as it is now, each once, oldest first."""
    calls: list[ParsedAction] = []
    for step in unchanged_run(history, page_key):
        if step.parsed is not None and step.parsed not in calls:
            calls.append(step.parsed)
    return calls


def cycled_calls(history: Sequence[PastStep], page_key: str) -> list[ParsedAction]:
    """The calls made on this page before it changed and came back, each once, oldest
    first, once the last step that changed the page was itself such a call: the loop is
    then being gone round a second time (a checkbox clicked checked, unchecked, checked;
    a section opened and closed again: each click changes the page, so no single step
    repeats a futile one). One call made again on a page it came back to is not yet a
    loop: after ``fill``, a mistaken ``clear`` and the ``fill`` again, the fill is the
    correction. Only the exact call counts."""
    if not page_key:
        return []
    earlier = history[: len(history) - len(unchanged_run(history, page_key))]
    # the last step that changed the page: calls since changed nothing (their own rule)
    if not earlier or not _made_before(earlier, len(earlier) - 1):
        return []
    calls: list[ParsedAction] = []
    for step in earlier:
        if step.page_key == page_key and step.parsed is not None and step.parsed not in calls:
            calls.append(step.parsed)
    return calls


def _made_before(history: Sequence[PastStep], index: int) -> bool:
    """Whether step ``index`` made a call already made on its page at an earlier step."""
    step = history[index]
    return bool(step.page_key) and step.parsed is not None and any(
        earlier.page_key == step.page_key and earlier.parsed == step.parsed
        for earlier in history[:index])


def is_futile(action: ParsedAction, made: Sequence[ParsedAction]) -> bool:
    """``action`` was already made on this unchanged page: the same call, or the same
    pointer action on the same element (a right click after a left one)."""
    return any(_same_call(action, call) for call in made)


def _same_call(one: ParsedAction, other: ParsedAction) -> bool:
    if one.name != other.name:
        return False
    return one == other or (one.spec.pointer and one.bids == other.bids)


def forbidden_calls(made: Sequence[ParsedAction]) -> list[ParsedAction]:
    """What an escape must not answer: every call made, and every pointer action on an
    element a click already left unchanged."""
    forbidden = list(made)
    clicked = {bid for call in made if call.name in _CLICKS for bid in call.bids}
    for bid in sorted(clicked):
        for name in ActionSet.registered().pointer_names:
            call = ParsedAction(name=name, arguments={"bid": bid})
            if call not in forbidden:
                forbidden.append(call)
    return forbidden


@dataclass(frozen=True)
class Repeat:
    """An answer that repeats a call already made on the page as it is now."""

    made: list[ParsedAction]
    """The calls made since the page last changed (the unchanged run), oldest first."""
    cycled: list[ParsedAction]
    """The calls made on this page before it changed and came back, oldest first."""
    is_cycle: bool
    """The answer goes round a loop (a cycled call), rather than repeating a call that
    changed nothing."""

    @property
    def forbidden(self) -> list[ParsedAction]:
        """What an escape must not answer: ``forbidden_calls`` of the unchanged run,
        and every cycled call."""
        forbidden = forbidden_calls(self.made)
        return forbidden + [call for call in self.cycled if call not in forbidden]


def find_repeat(action: ParsedAction | None, history: Sequence[PastStep],
                page_key: str) -> Repeat | None:
    """The repeat ``action`` makes on the page ``page_key``, or None if it is new there."""
    if action is None:
        return None
    made = futile_calls(history, page_key)
    cycled = cycled_calls(history, page_key)
    if is_futile(action, made):
        return Repeat(made, cycled, is_cycle=False)
    if action in cycled:
        return Repeat(made, cycled, is_cycle=True)
    return None
