"""Incremental focus steps: a page that changed little keeps the model's selection
without a model call; a stuck agent or a page that changed a lot gets a fresh one. On
the captured built-in functions page (7,700 lines), with scripted retrievers that
record their calls."""

from __future__ import annotations

import re
from typing import Any

import pytest

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.agent.filters.focus import FocusConfig, FocusFilter
from linewise.agent.filters.registry import FilterContext, get_filter
from linewise.agent.filters.stages.page_index import PageIndex
from linewise.agent.filters.view.page_diff import diff_pages
from linewise.testing import CallInfo, FunctionModel
from tests.support.trees import tree_lines

GOAL = "Which built-in turns an iterable into pairs with their position?"
NOTICE = ["\t[9001] alert 'Link copied'", "\t\tStaticText 'Link copied'"]


def last_shown_line(messages: list[dict[str, Any]], info: CallInfo) -> str:
    """A retriever that keeps the last line it is shown (far down the page)."""
    numbers = re.findall(r"^(\d+)\|", messages[-1]["content"], re.M)
    assert numbers
    return f'{{"think": "the last", "ranges": [[{numbers[-1]}, {numbers[-1]}]]}}'


def with_inserted(lines: list[str], at: int, new: list[str]) -> list[str]:
    return [*lines[:at], *new, *lines[at:]]


def chosen_line(model: FunctionModel, result: FilterResult) -> int:
    """0-based line the scripted retriever chose in its last call."""
    answer = model.requests[-1].messages[-1]["content"]
    last = int(re.findall(r"^(\d+)\|", answer, re.M)[-1]) - 1
    assert last + 1 in result.kept_lines
    return last


def make(name: str, model: FunctionModel, **config: Any) -> Any:
    if name == "focus":
        return FocusFilter(model, FocusConfig(**config))
    made = get_filter(name).bind(FilterContext(retriever=model))()
    if config:
        made.config = made.config.model_copy(update=config)
    return made


@pytest.mark.parametrize("name", ["focus", "focus-items", "focus-outline"])
async def test_a_little_changed_page_keeps_the_selection_without_a_model_call(
    name: str,
) -> None:
    lines = tree_lines("docs-functions.txt")
    model = FunctionModel(last_shown_line)
    focus = make(name, model)
    first = await focus.apply(FilterInput(goal=GOAL, lines=lines))
    assert len(model.requests) == 1
    chosen = chosen_line(model, first)
    # a click shows a notice near the top: every chosen line moves down by two
    after = with_inserted(lines, 3, NOTICE)
    clicked = first.shown_bids[0]
    second = await focus.apply(FilterInput(goal=GOAL, lines=after,
                                           history=[f"click('{clicked}')"]))
    assert len(model.requests) == 1  # no model call
    assert "carried over" in str(second.notes["incremental"])
    carried = second.notes["carried_over"]
    assert isinstance(carried, dict) and carried["changed_lines"] == 2
    assert after[chosen + 2] == lines[chosen] and chosen + 3 in second.kept_lines
    assert {4, 5} <= set(second.kept_lines)  # the notice itself is shown
    assert "9001" in second.shown_bids
    moved = {n + 2 for n in first.kept_lines if n > 3}
    assert len(moved & set(second.kept_lines)) >= 0.9 * len(moved)
    assert second.reduction > 0.9


async def test_a_stuck_agent_is_not_served_a_carried_selection() -> None:
    lines = tree_lines("docs-functions.txt")
    model = FunctionModel(last_shown_line)
    focus = FocusFilter(model)
    first = await focus.apply(FilterInput(goal=GOAL, lines=lines))
    after = with_inserted(lines, 3, NOTICE)
    history = [f"click('{first.shown_bids[0]}')"]
    carried = await focus.apply(FilterInput(goal=GOAL, lines=after, history=history))
    assert "carried_over" in carried.notes
    # the agent found nothing on the carried view: the next page changed little again,
    # but the selection that left it stuck is not carried over; it is shown more
    again = with_inserted(after, 3, ["\tStaticText 'Tip of the day'"])
    stuck = await focus.apply(FilterInput(goal=GOAL, lines=again,
                                          history=[*history, "noop()"]))
    escalation = stuck.notes["escalation"]
    assert isinstance(escalation, dict)
    assert escalation["level"] == 1 and escalation["reasons"] == ["noop"]
    assert "carried_over" not in stuck.notes
    assert stuck.notes["escalation_view"] == "every candidate, no model call"
    assert len(stuck.kept_lines) > len(carried.kept_lines)
    # stuck again on an unchanged page: the whole tree, not the same selection
    whole = await focus.apply(FilterInput(goal=GOAL, lines=again,
                                          history=[*history, "noop()", "noop()"]))
    assert whole.reduction == 0 and "incremental" not in whole.notes
    # unstuck and little changed: the model chooses afresh (nothing left to carry)
    calm = await focus.apply(FilterInput(
        goal=GOAL, lines=with_inserted(again, 3, ["\tStaticText 'Saved'"]),
        history=[*history, "noop()", "noop()", f"click('{first.shown_bids[0]}')"],
    ))
    assert len(model.requests) == 2 and "carried_over" not in calm.notes


async def test_a_page_that_changed_a_lot_asks_the_model_again() -> None:
    lines = tree_lines("docs-functions.txt")
    model = FunctionModel(last_shown_line)
    focus = FocusFilter(model)
    first = await focus.apply(FilterInput(goal=GOAL, lines=lines))
    # a section of 400 lines replaced (new content loaded into the page)
    after = [*lines[:3000], *(f"{line} (updated)" for line in lines[3000:3400]),
             *lines[3400:]]
    second = await focus.apply(FilterInput(
        goal=GOAL, lines=after, history=[f"click('{first.shown_bids[0]}')"],
    ))
    assert len(model.requests) == 2
    assert "changed too much" in str(second.notes["incremental"])
    assert "carried_over" not in second.notes and second.notes["stages"]


async def test_the_model_chooses_again_after_a_few_carried_steps() -> None:
    lines = tree_lines("docs-functions.txt")
    model = FunctionModel(last_shown_line)
    focus = FocusFilter(model, FocusConfig(carry_over_steps=2))
    page = lines
    history: list[str] = []
    notes: list[object] = []
    for step in range(5):
        result = await focus.apply(FilterInput(goal=GOAL, lines=page, history=list(history)))
        notes.append(result.notes.get("incremental"))
        history.append(f"click('{result.shown_bids[0]}')")
        page = with_inserted(page, 3, [f"\tStaticText 'Notice {step}'"])
    # model, carried, carried, model (two carried in a row), carried
    assert len(model.requests) == 2
    assert [str(n).startswith("little changed") for n in notes] == [
        False, True, True, False, True]
    assert "in a row" in str(notes[3])


async def test_small_changes_add_up_until_the_model_chooses_again() -> None:
    lines = tree_lines("docs-functions.txt")
    model = FunctionModel(last_shown_line)
    focus = FocusFilter(model, FocusConfig(carry_over_tokens=30, carry_over_steps=10))
    page = lines
    calls: list[int] = []
    for step in range(4):
        result = await focus.apply(FilterInput(goal=GOAL, lines=page,
                                               history=[f"scroll(0, {step})"]))
        calls.append(len(model.requests))
        # each step changes 12 tokens: two such steps fit in 30, the third does not
        page = with_inserted(page, 3, [f"\tStaticText 'A notice about step {step} here'"])
        assert result.tokens_shown < result.tokens_full
    assert calls == [1, 1, 1, 2]


async def test_filters_without_a_model_build_their_candidates_afresh() -> None:
    lines = tree_lines("docs-functions.txt")
    focus = get_filter("focus-candidates-items").bind(FilterContext())()
    await focus.apply(FilterInput(goal=GOAL, lines=lines))
    after = with_inserted(lines, 3, NOTICE)
    second = await focus.apply(FilterInput(goal=GOAL, lines=after, history=["scroll(0, 9)"]))
    assert "carried_over" not in second.notes
    stages = second.notes["stages"]
    assert isinstance(stages, dict) and stages["changed"] == [4, 5]


# -- the diff and the page index


def test_the_diff_maps_unchanged_lines_to_their_new_places() -> None:
    lines = tree_lines("docs-functions.txt")
    after = list(lines)
    after[7000] = after[7000] + ", checked='true'"  # replaced
    after[6000] = after[6000] + ", focused"  # state, not content: not a change
    after[5000:5002] = []  # two lines removed
    after[100:100] = ["\tStaticText 'a'", "\tStaticText 'b'", "\tStaticText 'c'"]
    diff = diff_pages(lines, after)
    assert [list(r) for r in diff.changed] == [[100, 101, 102], [7001]]
    assert diff.removed == 3
    assert diff.new_index(50) == 50 and diff.new_index(200) == 203
    assert diff.new_index(5000) is None and diff.new_index(5002) == 5003
    assert diff.new_index(7000) is None and diff.new_index(7001) == 7002
    assert diff.new_index(len(lines) - 1) == len(after) - 1
    assert diff.carried({10, 200, 5000, 7000}) == {10, 203}
    assert all(after[diff.new_index(i) or 0] == lines[i] for i in (0, 99, 100, 5900))
    assert after[diff.new_index(6000) or 0] == lines[6000] + ", focused"
    assert diff_pages(lines, lines).changed == []


def test_the_next_page_index_reads_only_the_lines_that_changed() -> None:
    lines = tree_lines("docs-functions.txt")
    first = PageIndex(lines)
    assert first.outline and first.ranker.top("enumerate", 1)
    roles = first.tree.roles
    after = with_inserted(lines, 3, NOTICE)
    second = first.following(after)
    assert first.following(list(lines)) is first
    # what was read of the first page is taken over, not read again
    assert second.tree.parsed(10) is first.tree.parsed(8)
    assert second.ranker.docs[10] is first.ranker.docs[8]
    assert second.tree.roles[5:] == roles[3:] and second.tree.roles[3] == "alert"
    assert [e.index for e in second.outline if e.index > 5] == [
        e.index + 2 for e in first.outline if e.index > 3]
