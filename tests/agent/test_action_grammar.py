"""The action grammar admits every valid action over a real observation's bids, and no
answer the parser would refuse or that names an element the view does not show."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linewise.agent.action_grammar import action_grammar
from linewise.agent.action_parser import ParsedAction, parse_action
from linewise.agent.actions import (
    ACTIONS,
    ActionContext,
    action_parameters,
    is_select,
    is_text_field,
)
from linewise.agent.response import parse_answer
from linewise.axtree import AXLine, bids_in, element_lines
from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.browser.executor import SettleConfig, execute_action
from linewise.runtime.browser.extraction import observe
from linewise.testing import StaticServer
from linewise.testing.gbnf import GrammarError, admits, gbnf_regex
from tests.support.paths import DATA

TREE = (DATA / "trees" / "miniwob-email-inbox.txt").read_text(encoding="utf-8")
BIDS = bids_in(TREE)
GRAMMAR = action_grammar(BIDS)

text = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"))
               | st.sampled_from("\n\t'\"\\"), max_size=40)
number = st.integers(-5000, 5000).map(float) | st.integers(-500, 500).map(lambda n: n / 4)
bid = st.sampled_from(BIDS)
button = st.sampled_from(["left", "middle", "right"])
modifiers = st.lists(st.sampled_from(["Alt", "Control", "ControlOrMeta", "Meta", "Shift"]),
                     max_size=3)

ARGUMENTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "click": st.fixed_dictionaries({"bid": bid}, optional={"button": button,
                                                           "modifiers": modifiers}),
    "dblclick": st.fixed_dictionaries({"bid": bid}, optional={"button": button}),
    "hover": st.fixed_dictionaries({"bid": bid}),
    "fill": st.fixed_dictionaries({"bid": bid, "value": text}),
    "clear": st.fixed_dictionaries({"bid": bid}),
    "select_option": st.fixed_dictionaries({"bid": bid, "options": text | st.lists(text)}),
    "press": st.fixed_dictionaries({"bid": bid, "key_comb": text}),
    "focus": st.fixed_dictionaries({"bid": bid}),
    "scroll": st.fixed_dictionaries({"delta_x": number, "delta_y": number}),
    "goto": st.fixed_dictionaries({"url": text}),
    "go_back": st.just({}),
    "go_forward": st.just({}),
    "new_tab": st.just({}),
    "tab_focus": st.fixed_dictionaries({"index": st.integers(-3, 50)}),
    "tab_close": st.just({}),
    "send_msg_to_user": st.fixed_dictionaries({"text": text}),
    "report_infeasible": st.fixed_dictionaries({"reason": text}),
    "noop": st.fixed_dictionaries({}, optional={"wait_ms": number}),
}
actions = st.sampled_from(sorted(ARGUMENTS)).flatmap(
    lambda name: ARGUMENTS[name].map(lambda args: ParsedAction(name=name, arguments=args)))
thought = st.text(alphabet=st.characters(blacklist_characters="<"), max_size=200)


def answer(thought_text: str, call: str) -> str:
    return f"<think>{thought_text}</think>\n<action>{call}</action>"


def keyword_form(action: ParsedAction) -> str:
    """The call with its required arguments positional and every optional one given
    as ``name=value``."""
    parts = []
    for param in action_parameters(ACTIONS[action.name]):
        if param.name in action.arguments:
            value = repr(action.arguments[param.name])
            required = param.default is inspect.Parameter.empty
            parts.append(value if required else f"{param.name}={value}")
    return f"{action.name}({', '.join(parts)})"


@settings(max_examples=300, deadline=None)
@given(actions, thought)
def test_every_valid_action_is_admitted(action: ParsedAction, thought_text: str) -> None:
    canonical = str(action)
    assert parse_action(canonical) == action  # the case is a valid action
    assert admits(GRAMMAR, answer(thought_text, canonical)), canonical
    assert admits(GRAMMAR, answer(thought_text, keyword_form(action))), keyword_form(action)


@settings(max_examples=200, deadline=None)
@given(actions, thought)
def test_what_the_grammar_admits_is_what_the_parser_takes(
    action: ParsedAction, thought_text: str
) -> None:
    parsed = parse_answer(answer(thought_text, str(action)))
    assert parsed.action == action and parsed.error is None


@pytest.mark.parametrize("call", [
    "click('999')",                      # not on the page
    "click('textbox')",                  # a role, not an id
    "fill('To:', 'kerry')",              # a label
    "click(12)",                         # an unquoted id: the parser's fix, not the grammar's
    "click('12'); click('13')",          # two statements
    "click('12')\nclick('13')",
    "socket.create_server(('', 8080))",  # a function call outside the vocabulary
    "click(bid)",                        # not a literal
    "fill('12')",                        # a missing argument
    "click('12', button='up')",          # a value outside the Literal
    "click(button='left', '12')",        # positional after keyword
    "scroll('down')",
    "noop(wait_ms=1e9)",
    "",
])
def test_invalid_answers_are_refused(call: str) -> None:
    assert BIDS and "999" not in BIDS
    assert not admits(GRAMMAR, answer("x", call))


def test_the_answer_shape_is_enforced() -> None:
    assert admits(GRAMMAR, "<think>ok</think><action>go_back()</action>")
    assert not admits(GRAMMAR, "<action>go_back()</action>")  # no thought
    assert not admits(GRAMMAR, answer("a <b>", "go_back()"))  # a tag in the thought
    assert not admits(GRAMMAR, answer("x" * 601, "go_back()"))  # over the thought's bound
    assert not admits(GRAMMAR, answer("x", "go_back()") + "<action>noop()</action>")


def test_actions_offered_and_views_without_elements() -> None:
    offered = action_grammar(BIDS, ["click", "send_msg_to_user"])
    assert admits(offered, answer("", f"click('{BIDS[0]}')"))
    assert not admits(offered, answer("", "go_back()"))
    empty = action_grammar([])  # nothing to click: the element actions are left out
    assert admits(empty, answer("", "scroll(0, 200)"))
    assert not admits(empty, answer("", "click('1')"))
    unknown = action_grammar(None)  # ids unknown: any id of BrowserGym's shape
    assert admits(unknown, answer("", "click('aB12')"))
    assert not admits(unknown, answer("", "click('textbox')"))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(actions, min_size=1, max_size=3), actions)
def test_forbidden_calls_are_refused_and_every_other_call_admitted(
    forbidden: list[ParsedAction], other: ParsedAction
) -> None:
    # escaping a futile repeat: the same action on the same element is refused, whatever
    # its other arguments; an action that names no element is left out altogether
    grammar = action_grammar(BIDS, forbid=forbidden)
    same = any(other.name == f.name and (not f.bids or set(other.bids) & set(f.bids))
               for f in forbidden)
    assert admits(grammar, answer("", str(other))) is not same, (
        [str(f) for f in forbidden], str(other))


def test_a_forbidden_call_that_leaves_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no action is left"):
        action_grammar(["5"], ["click"], forbid=[parse_action("click('5')")])


def test_the_translator_refuses_what_it_cannot_read() -> None:
    with pytest.raises(GrammarError, match="recursive"):
        gbnf_regex('root ::= "(" root ")" | "x"')
    with pytest.raises(GrammarError, match="no root"):
        gbnf_regex('call ::= "x"')


@pytest.mark.slow
async def test_kinds_of_element_agree_with_what_playwright_can_do(
    session: BrowserSession, pages: StaticServer
) -> None:
    """On every kind of form field Chromium renders, ``fill`` and ``select_option`` are
    tried for real: the grammar's element kinds never forbid one that works, and they
    forbid them on buttons, links, checkboxes and text."""
    await session.page.goto(pages.url("fields.html"))
    obs = await observe(session, screenshot=False)
    elements = element_lines(obs.lines, obs.elements)
    ctx = ActionContext(session, timeout_ms=800, known_bids=frozenset(obs.elements))
    works: dict[str, set[str]] = {"fill": set(), "select_option": set()}  # bids
    unsettled = SettleConfig(quiet_ms=0)  # only whether the action ran matters here
    for bid in elements:
        for name, value in (("fill", "1"), ("select_option", "large")):
            outcome = await execute_action(ParsedAction(name=name, arguments={
                "bid": bid, ("value" if name == "fill" else "options"): value}), ctx,
                unsettled)
            if outcome.error is None:
                works[name].add(bid)
    grammar = action_grammar(elements)
    for bid, line in elements.items():
        fill_ok = admits(grammar, answer("", f"fill('{bid}', '1')"))
        select_ok = admits(grammar, answer("", f"select_option('{bid}', 'large')"))
        assert fill_ok == is_text_field(line) and select_ok == is_select(line)
        assert fill_ok or bid not in works["fill"], line
        assert select_ok or bid not in works["select_option"], line
        if line.role in {"button", "link", "checkbox", "radio", "StaticText", "paragraph"}:
            assert not fill_ok and not select_ok, line
        if line.control in {"checkbox", "radio"}:  # a label wrapping one
            assert not fill_ok and not select_ok, line
        assert admits(grammar, answer("", f"click('{bid}')"))
    roles = {name: {elements[bid].role for bid in bids} for name, bids in works.items()}
    assert {"textbox", "spinbutton", "searchbox", "slider", "generic"} <= roles["fill"]
    assert roles["select_option"] == {"combobox", "LabelText"}
    controls = {line.control for line in elements.values() if line.role == "LabelText"}
    assert {"textbox", "checkbox", "radio", "combobox", "Date"} <= controls


def test_an_action_with_nothing_it_can_act_on_is_left_out() -> None:
    lines = ["RootWebArea 'Docs'", "\t[4] link 'socket.shutdown'",
             "\t[5] searchbox 'Quick search'", "\t[6] button 'Go'"]
    elements: dict[str, AXLine | None] = dict(element_lines(lines, ["4", "5", "6"]))
    grammar = action_grammar(elements)
    assert admits(grammar, answer("", "fill('5', 'shutdown')"))
    assert not admits(grammar, answer("", "fill('4', 'shutdown')"))
    assert not admits(grammar, answer("", "select_option('5', 'SHUT_RDWR')"))
    assert "call-select-option" not in grammar
    elements["7"] = None  # a shown element whose line is not known may be named by any
    assert admits(action_grammar(elements), answer("", "select_option('7', 'x')"))
