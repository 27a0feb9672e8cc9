"""Prompt assembly from the template files."""

from __future__ import annotations

import pytest

from linewise.agent.actions import describe_action
from linewise.agent.actions import fill as fill_action
from linewise.agent.prompt import (
    PageView,
    PastStep,
    build_action_messages,
    render_history,
    repeated_action_note,
)
from linewise.prompts import load_prompt, render_prompt
from linewise.records import Tab


def test_action_prompt_has_every_part() -> None:
    view = PageView(
        url="http://x/form", focused_bid="7",
        tabs=[Tab(index=0, title="Form", url="http://x/form", active=True)],
        text="RootWebArea 'Form'\n\t[7] textbox 'Name {with braces}'",
        last_action_error="Element with bid '99': not in the current page observation.",
    )
    history = [PastStep(think="Fill the name.", action="fill('7', 'Al')", error=None)]
    system, user = build_action_messages("Sign up as $Alice", view, history)
    assert system["role"] == "system" and "exactly ONE action" in system["content"]
    content = user["content"]
    assert "# Goal\nSign up as $Alice" in content
    assert "[7] textbox 'Name {with braces}'" in content
    assert "Tab 0 (active): 'Form' http://x/form" in content and "Focused element: [7]" in content
    assert "Step 1:\n  thought: Fill the name.\n  action: fill('7', 'Al')" in content
    assert "# Error from your last action\nElement with bid '99'" in content
    assert describe_action(fill_action) in system["content"]
    assert "<action>" in system["content"] and content.rstrip().endswith("<action>…</action>.")
    # the system message is the same at every step, so prefix caches can reuse it
    other = build_action_messages("Another goal", view.model_copy(update={"text": "x"}), [])
    assert other[0] == system


def test_history_is_bounded_and_thoughts_shortened() -> None:
    steps = [PastStep(think="t" * 1000, action=f"noop({i})") for i in range(30)]
    text = render_history(steps, max_steps=5)
    assert text.startswith("(25 earlier step(s) not shown)") and "Step 26:" in text
    assert "Step 25:" not in text and "t" * 401 not in text
    assert "first step" in render_history([])


def test_templates_load_and_demand_every_value() -> None:
    assert "$goal" in load_prompt("action_user.md").template
    with pytest.raises(KeyError):
        render_prompt("action_retry.md")
    with pytest.raises(FileNotFoundError):
        load_prompt("no_such_prompt.md")


def test_repeated_successful_action_gets_a_note() -> None:
    fill = PastStep(think="t", action="fill('16', 'Myron')")
    assert repeated_action_note([fill]) == ""
    note = repeated_action_note([fill, fill])
    assert "last 2 actions were all fill('16', 'Myron')" in note
    assert "last 3 actions" in repeated_action_note([fill, fill, fill])
    failed = PastStep(action="fill('16', 'Myron')", error="boom")
    assert repeated_action_note([fill, failed]) == ""  # errors have their own feedback
    other = PastStep(action="click('17')")
    assert repeated_action_note([fill, fill, other]) == ""
    view = PageView(url="u", text="t")
    assert "last 2 actions" in build_action_messages("g", view, [fill, fill])[1]["content"]


def test_the_history_says_how_the_named_element_changed_but_not_that_it_took_the_focus(
) -> None:
    from linewise.agent.action_parser import parse_action
    from linewise.axtree import parse_line

    def step(call: str, before: str, after: str | None) -> PastStep:
        return PastStep(action=call, parsed=parse_action(call), target=parse_line(before),
                          target_after=parse_line(after) if after else None)

    box = "[22] checkbox 'a8h7', checked='false'"
    checked = step("click('22')", box, "[22] checkbox 'a8h7', focused, checked='true'")
    assert render_history([checked]).endswith(
        "  result: [22] checkbox 'a8h7' is now checked='true'\n")
    opened = step("click('5')", "[5] button 'More', expanded='false', selected",
                  "[5] button 'Less', focused, expanded='true'")
    assert render_history([opened]).endswith(
        "  result: [5] button 'Less' is now expanded='true' and is no longer selected\n")
    for unchanged in (step("click('22')", box, f"{box}, focused"), step("click('22')", box, None)):
        assert "result" not in render_history([unchanged])
