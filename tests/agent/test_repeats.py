"""Which answers repeat what already changed nothing: the unchanged run, futile calls and
what an escape forbids."""

from __future__ import annotations

from linewise.agent.action_parser import parse_action
from linewise.agent.policy import page_key
from linewise.agent.prompt import StepMemory
from linewise.agent.repeats import forbidden_calls, futile_calls, is_futile


def _step(call: str, key: str) -> StepMemory:
    return StepMemory(action=call, parsed=parse_action(call), page_key=key)


def test_the_unchanged_run_ends_where_the_page_last_changed() -> None:
    history = [_step("click('3')", "a"), _step("focus('5')", "b"), _step("click('5')", "b"),
               _step("focus('5')", "b")]
    assert [str(c) for c in futile_calls(history, "b")] == ["focus('5')", "click('5')"]
    assert futile_calls(history, "c") == [] and futile_calls(history, "") == []
    # click('3') was made on page a, which the page no longer is
    assert not is_futile(parse_action("click('3')"), futile_calls(history, "b"))


def test_a_call_alternated_with_another_is_futile_the_second_time() -> None:
    made = futile_calls([_step("focus('617')", "p"), _step("click('617')", "p")], "p")
    assert is_futile(parse_action("focus('617')"), made)
    assert is_futile(parse_action("click('617', 'right')"), made)  # the same element, pointed at
    assert not is_futile(parse_action("hover('617')"), made)  # not tried yet: allowed
    assert not is_futile(parse_action("click('618')"), made)


def test_a_fill_is_futile_only_with_the_same_value() -> None:
    made = [parse_action("fill('16', 'Alice')")]
    assert is_futile(parse_action("fill('16', 'Alice')"), made)
    assert not is_futile(parse_action("fill('16', 'Bob')"), made)


def test_an_unchanging_click_forbids_every_pointer_action_on_its_element() -> None:
    forbidden = [str(c) for c in forbidden_calls([parse_action("click('9')"),
                                                  parse_action("fill('4', 'x')")])]
    assert forbidden == ["click('9')", "fill('4', 'x')", "dblclick('9')", "hover('9')",
                         "focus('9')"]
    # a hover that changed nothing says nothing of what a click would do
    assert [str(c) for c in forbidden_calls([parse_action("hover('9')")])] == ["hover('9')"]


def test_focus_and_the_fragment_do_not_change_the_page_key() -> None:
    plain = page_key("http://docs/a.html", ["RootWebArea 'A'", "\t[4] link 'x'"])
    moved = page_key("http://docs/a.html#x", ["RootWebArea 'A', focused, url='http://docs/a.html#x'",
                                              "\t[4] link 'x', focused"])
    assert plain == moved
    assert plain != page_key("http://docs/b.html", ["RootWebArea 'A'", "\t[4] link 'x'"])
    assert plain != page_key("http://docs/a.html", ["RootWebArea 'A'", "\t[4] link 'y'"])
