"""The action parser: literal calls of allowlisted actions only, with precise errors."""

from __future__ import annotations

import pytest

from linewise.agent.action_parser import parse_action
from linewise.agent.prompt import system_prompt
from linewise.agent.response import parse_answer
from linewise.errors import ActionParseError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("click('12')", "click('12')"),
        ("click(12)", "click('12')"),
        ('click("a51", button="right")', "click('a51', 'right')"),
        ("click('48', modifiers=['Shift'])", "click('48', modifiers=['Shift'])"),
        ("fill('15', 'Alice')", "fill('15', 'Alice')"),
        ("fill('45', 'multi-line\\nexample')", "fill('45', 'multi-line\\nexample')"),
        ("select_option('c48', ['red', 'green'])", "select_option('c48', ['red', 'green'])"),
        ("scroll(0, -200.5)", "scroll(0.0, -200.5)"),
        ("noop()", "noop()"),
        ("tab_focus(2)", "tab_focus(2)"),
        ("```python\nclick('5')\n```", "click('5')"),
        ("  press('3', 'Enter')  ", "press('3', 'Enter')"),
    ],
)
def test_valid_actions(text: str, expected: str) -> None:
    assert str(parse_action(text)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("__import__('os').system('x')", "Only the listed action functions"),
        ("os.system('rm -rf /')", "Only the listed action functions"),
        ("page.click('12')", "Only the listed action functions"),
        ("eval('1')", "Unknown action 'eval'"),
        ("exec('import os')", "Unknown action 'exec'"),
        ("click(bid)", "is not a literal value"),
        ("click(str(12))", "is not a literal value"),
        ("click('1' + '2')", "is not a literal value"),
        ("click(*args)", "'*' arguments are not allowed"),
        ("click(**kw)", "'**' arguments are not allowed"),
        ("click('1'); click('2')", "exactly one action"),
        ("import os", "single function call"),
        ("x = click('1')", "single function call"),
        ("click('1'", "not valid Python call syntax"),
        ("", "empty"),
        ("click()", "missing a required argument: 'bid'"),
        ("click('1', foo=2)", "unexpected keyword argument 'foo'"),
        ("click('1', button='up')", "button='up' is invalid"),
        ("tab_focus('x')", "index='x' is invalid"),
        ("fill('1', 42)", "value=42 is invalid"),
        ("(lambda: 1)()", "Only the listed action functions"),
        # the docstring examples' placeholders, copied as they stand (the embedded model
        # did): refused so that the model is asked again
        ("send_msg_to_user('<the answer, as the page states it>')",
         "Replace it with the answer, as the page states it."),
        ('report_infeasible(" <why the goal cannot be achieved>")', "placeholder"),
    ],
)
def test_rejected_with_clear_error(text: str, message: str) -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action(text)
    assert message in str(info.value)


def test_an_answer_in_angle_brackets_that_is_no_placeholder_stands() -> None:
    assert parse_action("send_msg_to_user('<html>')").arguments == {"text": "<html>"}


def test_bids_of_an_action() -> None:
    assert parse_action("fill('a12', 'x')").bids == ["a12"]
    assert parse_action("scroll(0, 10)").bids == []


def test_answer_parsing() -> None:
    answer = parse_answer("<think>The button is 12.</think>\n<action>click('12')</action>")
    assert answer.think == "The button is 12." and str(answer.action) == "click('12')"
    # a quoted placeholder beside the real action is passed over; an unclosed block at
    # the end is accepted
    answer = parse_answer("e.g. <action>one action call</action> so <action>click('3')")
    assert str(answer.action) == "click('3')"
    # two different valid calls are never guessed between
    two = parse_answer("<action>noop()</action> then <action>click('3')</action>")
    assert two.action is None
    assert two.error == ("The answer has 2 <action> blocks with different actions "
                         "(noop(), click('3')); give exactly one.")
    same = parse_answer("<action>click('3')</action><action>click(\"3\")</action>")
    assert str(same.action) == "click('3')"
    answer = parse_answer("<THINK>x</THINK><ACTION>noop(10)</ACTION>")
    assert answer.think == "x" and str(answer.action) == "noop(10.0)"
    missing = parse_answer("<think>only thinking</think>")
    assert missing.action is None and "no <action>" in (missing.error or "")
    bad = parse_answer("<action>click(bid)</action>")
    assert bad.action is None and bad.action_text == "click(bid)" and bad.error


def test_actions_the_prompt_left_out_are_refused() -> None:
    allowed = ["click", "fill", "send_msg_to_user"]

    assert str(parse_action("click('3')", allowed)) == "click('3')"
    with pytest.raises(ActionParseError) as info:
        parse_action("goto('http://x')", allowed)
    assert str(info.value) == (
        "Action 'goto' is not available here. "
        "Available actions: click, fill, send_msg_to_user."
    )
    with pytest.raises(ActionParseError, match=r"Unknown action 'eval'\. Available actions: c"):
        parse_action("eval('1')", allowed)
    assert str(parse_action("goto('http://x')")) == "goto('http://x')"  # default: every action
    with pytest.raises(ValueError, match="unknown action"):
        parse_action("click('3')", ["click", "teleport"])


def test_parse_answer_and_the_prompt_take_the_same_action_names() -> None:
    allowed = ("click", "noop")
    answer = parse_answer("<think>x</think><action>scroll(0, 100)</action>", allowed)
    assert answer.action is None and answer.action_text == "scroll(0, 100)"
    assert answer.error is not None and "'scroll' is not available here" in answer.error
    assert parse_answer("<action>noop()</action>", allowed).action is not None

    prompt = system_prompt(allowed)
    assert "click(" in prompt and "noop(" in prompt and "scroll(" not in prompt
    assert "scroll(" in system_prompt()
