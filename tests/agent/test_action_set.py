"""What the runtime knows of an action is declared on its registration, and the action set
a task offers is built from it: a new action registered with its properties is offered,
described, parsed, constrained and treated by every rule without another list naming it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from linewise.agent import actions
from linewise.agent.action_grammar import action_grammar
from linewise.agent.action_parser import parse_action
from linewise.agent.actions import ActionContext, ActionSet, action, is_select, is_text_field
from linewise.agent.prompt import system_prompt
from linewise.agent.repeats import forbidden_calls, is_futile
from linewise.agent.targets import inert_bids
from linewise.axtree import element_lines
from linewise.testing.gbnf import admits

LINES = [
    "RootWebArea 'Docs'",
    "\t[3] paragraph ''",
    "\t\tStaticText 'Return the source code of an object.'",
    "\t[4] link 'getsource()'",
    "\t[5] textbox 'Search'",
]
ELEMENTS = element_lines(LINES, ["3", "4", "5"])


def _answer(call: str) -> str:
    return f"<think>x</think><action>{call}</action>"


@pytest.fixture
def registry() -> Iterator[None]:
    """Whatever a test registers is gone after it: the vocabulary is the module's."""
    before = dict(actions.REGISTRY)
    yield
    actions.REGISTRY.clear()
    actions.REGISTRY.update(before)


def test_the_vocabulary_declares_its_properties_where_each_action_is_registered() -> None:
    every = ActionSet.registered()
    assert every.pointer_names == ("click", "dblclick", "hover", "focus")
    assert every.ending_names == ("send_msg_to_user", "report_infeasible")
    assert [n for n, s in every.items() if s.leaves_page] == [
        "goto", "go_back", "go_forward", "new_tab", "tab_focus", "tab_close"]
    assert {n: s.acts_on for n, s in every.items() if s.acts_on} == {
        "fill": is_text_field, "clear": is_text_field, "select_option": is_select}
    assert [n for n, s in every.items() if s.types_text] == ["fill", "select_option", "press"]
    assert [n for n, s in every.items() if s.opt_in] == ["run_skill"]
    assert [n for n, s in every.items() if not s.replayed] == ["noop"]
    assert parse_action("hover('4')").spec is every["hover"]


def test_a_task_is_offered_what_its_kind_allows_in_the_prompts_order() -> None:
    standard = ActionSet.standard()
    assert "run_skill" not in standard and list(standard) == [
        n for n in ActionSet.registered() if n != "run_skill"]
    assert ActionSet.for_task(agent_can_end=True, single_page=False) == standard
    page_ends = ActionSet.for_task(agent_can_end=False, single_page=True, skills=True)
    assert not page_ends.ending_names and "goto" not in page_ends and "tab_close" not in page_ends
    assert page_ends.names[-1] == "run_skill" and "noop" in page_ends
    # the set goes wherever names do: the prompt and the parser take it as they take names
    assert system_prompt(page_ends) == system_prompt(page_ends.names)
    assert "goto(" not in page_ends.describe() and "run_skill(" in page_ends.describe()
    assert ActionSet.of(page_ends) is page_ends and ActionSet.of(None) == standard
    assert ActionSet.of(["noop", "click"]).names == ("noop", "click")
    assert standard.subset(["noop", "click"]).names == ("click", "noop")
    with pytest.raises(ValueError, match="not in this action set: run_skill"):
        standard.subset(["run_skill"])
    with pytest.raises(ValueError, match="unknown action"):
        ActionSet(["click", "teleport"])


@pytest.mark.usefixtures("registry")
def test_a_new_pointer_action_is_offered_and_treated_as_one_by_its_registration_alone(
) -> None:
    @action(pointer=True)
    async def tap(ctx: ActionContext, bid: str) -> None:
        """
        Tap an element, as a finger does.

        Examples:
            tap('12')
        """
        element = await ctx.locate(bid)
        await element.tap(timeout=ctx.timeout_ms)

    # offered, to every kind of task, and described by its own docstring
    for agent_can_end in (True, False):
        offered = ActionSet.for_task(agent_can_end=agent_can_end, single_page=not agent_can_end)
        assert "tap" in offered and "tap" in offered.pointer_names
    assert "tap(bid: str)\n    Tap an element, as a finger does." in system_prompt()
    # parsed, and known as a pointer action
    call = parse_action("tap('3')")
    assert str(call) == "tap('3')" and call.spec.pointer
    # a tap on a paragraph answers no click, as a click would not
    assert inert_bids([call], ELEMENTS, frozenset()) == ["3"]
    # a click that changed nothing forbids a tap on its element
    forbidden = forbidden_calls([parse_action("click('3')")])
    assert "tap('3')" in [str(c) for c in forbidden]
    assert is_futile(parse_action("tap('3')"), forbidden)
    # under the grammar, pointer actions may name only the targets offered
    grammar = action_grammar(ELEMENTS, pointer_bids=["4"])
    assert admits(grammar, _answer("tap('4')"))
    assert not admits(grammar, _answer("tap('3')"))
    assert admits(grammar, _answer("fill('5', 'x')"))  # no pointer action


@pytest.mark.usefixtures("registry")
def test_a_new_action_on_some_elements_names_only_those_and_properties_need_an_element(
) -> None:
    @action(acts_on=is_text_field, types_text=True)
    async def type_text(ctx: ActionContext, bid: str, text: str) -> None:
        """
        Type text into a field, key by key.

        Examples:
            type_text('12', 'hello')
        """

    grammar = action_grammar(ELEMENTS)
    assert admits(grammar, _answer("type_text('5', 'x')"))
    assert not admits(grammar, _answer("type_text('4', 'x')"))
    assert parse_action("type_text('5', 'x')").spec.types_text

    async def wait(ctx: ActionContext) -> None:
        """Wait."""

    with pytest.raises(TypeError, match="wait names no element"):
        action(pointer=True)(wait)
    with pytest.raises(TypeError, match="must be async"):
        action(lambda ctx: None)
    assert "wait" not in actions.REGISTRY
