"""AXTree lines: one parser for the flattened tree, checked on real captured trees."""

from __future__ import annotations

import pytest

from linewise.axtree import (
    AXLine,
    bid_of,
    bids_in,
    element_lines,
    line_depth,
    number_lines,
    parse_line,
    without_state,
)
from linewise.runtime.browser.observation import Observation
from tests.support.paths import TREES


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "\t\t[12] button 'OK', clickable, focused",
            AXLine(2, "12", "button", "OK", ("clickable", "focused")),
        ),
        (
            "RootWebArea 'Email Inbox Task', focused, url='http://127.0.0.1:1/a, b.html'",
            AXLine(0, None, "RootWebArea", "Email Inbox Task",
                   ("focused", "url='http://127.0.0.1:1/a, b.html'")),
        ),
        (
            "\t[a7] textbox 'Search, find' value='x, y', required, describedby=['a', 'b']",
            AXLine(1, "a7", "textbox", "Search, find",
                   ("value='x, y'", "required", "describedby=['a', 'b']")),
        ),
        ("\t[11] generic, clickable", AXLine(1, "11", "generic", None, ("clickable",))),
        ("\t\t\tStaticText 'Anne'", AXLine(3, None, "StaticText", "Anne")),
        ("[5] image ''", AXLine(0, "5", "image", "")),
        ("\tStaticText \"it's\"", AXLine(1, None, "StaticText", "it's")),
        ("\tStaticText '\\\\x'", AXLine(1, None, "StaticText", "\\x")),
        ("\t… 3 lines omitted …", AXLine(1, None, "…", None, ("3 lines omitted …",))),
        ("", AXLine(0, None, "", None)),
    ],
)
def test_parse_line(line: str, expected: AXLine) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize("name", sorted(p.name for p in TREES.glob("*.txt")))
def test_every_captured_line_parses_back_to_its_own_head(name: str) -> None:
    lines = (TREES / name).read_text(encoding="utf-8").splitlines()
    for line in lines:
        parsed = parse_line(line)
        assert parsed.depth == line_depth(line)
        assert parsed.bid == bid_of(line)
        assert parsed.role and " " not in parsed.role
        # BrowserGym writes the name with repr(): the head is the line's own prefix.
        assert line.startswith("\t" * parsed.depth + parsed.head()), line


def test_head_shortens_the_name() -> None:
    line = parse_line("\t[5] navigation 'Primary navigation with many words', focused")
    assert line.head() == "[5] navigation 'Primary navigation with many words'"
    assert line.head(max_name=10) == "[5] navigation 'Primary n…'"
    assert line.has_flag("focused") and not line.has_flag("clickable")


def test_bids_in_reads_only_node_lines() -> None:
    text = "\n".join([
        "RootWebArea 'x'",
        "\t[3] link 'see [4] below'",
        "\t… 2 lines omitted …",
        "\t\t[a5] button 'Go'",
    ])
    assert bids_in(text) == ["3", "a5"]
    assert bids_in(text.split("\n")) == ["3", "a5"]
    assert bid_of("12|\t[3] link 'x'") is None  # numbered lines are not node lines


def test_number_lines_starts_where_asked() -> None:
    assert number_lines(["a", "\tb"]) == "1|a\n2|\tb"
    assert number_lines(["c"], start=7) == "7|c"


def test_interactive_hint_lists_whole_heads_of_usable_elements() -> None:
    obs = Observation(url="http://x/", title="t", tabs=[], lines=[
        "RootWebArea 'Shop', focused",
        "\t[4] heading 'Cart'",
        "\t[5] button 'Pay, now', clickable",
        "\t[6] textbox 'Card' value='4111', required",
        "\tStaticText 'button'",
        "\t[7] menuitemcheckbox 'Gift'",
        "\t[8] generic, clickable",
        "\t[9] link 'Help'",
    ])
    assert obs.interactive_hint() == (
        "[5] button 'Pay, now'; [6] textbox 'Card'; [8] generic; [9] link 'Help'"
    )
    assert obs.interactive_hint(limit=1) == "[5] button 'Pay, now'"


@pytest.mark.parametrize(("line", "stable"), [
    ("RootWebArea 'Shop', focused, url='http://x/a.html#b'", "RootWebArea 'Shop'"),
    ("\t\t[16] textbox 'Quick search', focused, required",
     "\t\t[16] textbox 'Quick search', required"),
    ("\t[3] link 'a, focused', url='http://x/#c'", "\t[3] link 'a, focused', url='http://x/#c'"),
    ("\t[4] textbox '', value='focused', focused", "\t[4] textbox '', value='focused'"),
    # as the browser writes a filled field: the value after a space; without the flag
    # the line must read as it does on a step where the field lost focus
    ("\t[16] textbox '' value='Myron', focused", "\t[16] textbox '' value='Myron'"),
    ("\t[16] textbox '' value='a, b', focused, required",
     "\t[16] textbox '' value='a, b', required"),
    ("\tStaticText 'focused'", "\tStaticText 'focused'"),
    ("\t… 3 lines omitted …", "\t… 3 lines omitted …"),
])
def test_a_lines_state_is_its_focus_and_the_documents_url(line: str, stable: str) -> None:
    # the name's text and other elements' urls are content; the prompt states focus and URL
    assert without_state(line) == stable


def test_a_label_carries_the_role_of_the_control_it_wraps() -> None:
    lines = ["RootWebArea 'Form'",
             "\t[3] LabelText ''", "\t\tStaticText 'Agree'", "\t\t[4] checkbox 'Agree'",
             "\t[5] LabelText ''", "\t\t[6] generic, clickable", "\t\t\t[7] textbox 'Name'",
             "\t[8] LabelText 'City'",  # a <label for=…>: its control is elsewhere
             "\t[9] combobox 'City'"]
    elements = element_lines(lines, ["3", "5", "8", "9"])  # 4 and 7 not shown: still read
    assert [elements[b].control for b in ("3", "5", "8", "9")] == [
        "checkbox", "textbox", None, None]
