"""Which answers repeat what already changed nothing, or go round a loop: the unchanged
run, futile and cycled calls, and what an escape forbids."""

from __future__ import annotations

from linewise.agent.action_parser import parse_action
from linewise.agent.history import PastStep
from linewise.agent.page_view import page_key
from linewise.agent.repeats import (
    cycled_calls,
    find_repeat,
    forbidden_calls,
    futile_calls,
    is_futile,
)


def _step(call: str, key: str) -> PastStep:
    return PastStep(action=call, parsed=parse_action(call), page_key=key)


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


def test_a_call_made_again_on_a_page_that_came_back_twice_running_is_a_loop() -> None:
    # click-checkboxes-transfer: the 1.5B model clicked one checkbox six times, checking
    # and unchecking it (pages a, b, a, b…)
    history = [_step("click('22')", "a"), _step("click('22')", "b")]
    # the first call made again is allowed: it may correct a mistaken undo
    assert cycled_calls(history, "a") == []
    assert find_repeat(parse_action("click('22')"), history, "a") is None
    history.append(_step("click('22')", "a"))
    # made again right after another call made again: the loop, a second time round
    assert [str(c) for c in cycled_calls(history, "b")] == ["click('22')"]
    repeat = find_repeat(parse_action("click('22')"), history, "b")
    assert repeat is not None and repeat.is_cycle
    assert [str(c) for c in repeat.forbidden] == ["click('22')"]
    # on the page it came back to, any other call is allowed
    assert find_repeat(parse_action("click('31')"), history, "b") is None
    assert find_repeat(parse_action("focus('22')"), history, "b") is None
    assert cycled_calls(history, "") == [] and cycled_calls(history, "c") == []


def test_a_fill_made_again_after_a_mistaken_clear_is_a_correction() -> None:
    # enter-text: fill, a mistaken clear, the fill again: then Submit, not the clear again
    history = [_step("fill('16', 'Myron')", "empty"), _step("clear('16')", "filled"),
               _step("clear('16')", "empty")]
    assert find_repeat(parse_action("fill('16', 'Myron')"), history, "empty") is None
    history.append(_step("fill('16', 'Myron')", "empty"))
    repeat = find_repeat(parse_action("clear('16')"), history, "filled")
    assert repeat is not None and repeat.is_cycle
    assert find_repeat(parse_action("click('17')"), history, "filled") is None


def test_the_unchanged_run_is_not_counted_as_a_cycle() -> None:
    history = [_step("click('5')", "a"), _step("click('7')", "b"), _step("click('5')", "a"),
               _step("click('7')", "b"), _step("focus('9')", "a"), _step("focus('9')", "a")]
    # click('7') took the page back to a a second time: click('5') would go round again
    assert [str(c) for c in cycled_calls(history, "a")] == ["click('5')"]
    # focus('9') again on page a as it is now: the unchanged run's rule, not a cycle
    repeat = find_repeat(parse_action("focus('9')"), history, "a")
    assert repeat is not None and not repeat.is_cycle
    assert [str(c) for c in repeat.forbidden] == ["focus('9')", "click('5')"]


def test_calls_that_changed_nothing_do_not_hide_a_loop() -> None:
    # the demo's enter-text: fill, clear, clear (nothing to clear), fill, then a fill
    # that changed nothing; the clear it escaped to went round the loop again
    history = [_step("fill('16', 'Myron')", "empty"), _step("clear('16')", "filled"),
               _step("clear('16')", "empty"), _step("fill('16', 'Myron')", "empty"),
               _step("fill('16', 'Myron')", "filled")]
    repeat = find_repeat(parse_action("clear('16')"), history, "filled")
    assert repeat is not None and repeat.is_cycle
    assert [str(c) for c in repeat.forbidden] == ["fill('16', 'Myron')", "clear('16')"]
