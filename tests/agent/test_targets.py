"""Which elements a click can act on, and which of those are closest to the goal."""

from __future__ import annotations

from linewise.agent.action_parser import parse_action
from linewise.agent.targets import closest_targets, inert_bids, pointer_targets
from linewise.axtree import element_lines

PAGE = "http://docs/library/inspect.html"
LINES = [
    "RootWebArea 'inspect'",
    f"\t[1] link 'inspect — Inspect live objects', url='{PAGE}'",
    "\t[2] term 'inspect.getsource(object)'",
    "\t[3] paragraph ''",
    "\t\tStaticText 'Return the text of the source code for an object.'",
    f"\t[4] link 'getsource()', url='{PAGE}#inspect.getsource'",
    "\t[5] link 'Source code', url='http://docs/library/source.html'",
    "\t[6] listitem ''",
    "\t[7] button 'Go'",
    "\t[8] LabelText 'Object'",
]
ELEMENTS = element_lines(LINES, [str(i) for i in range(1, 9)])
GOAL = "Open the entry of the function that returns an object's source code: inspect.getsource."


def test_only_controls_links_labels_and_listened_to_elements_are_targets() -> None:
    assert pointer_targets(ELEMENTS, frozenset()) == ["1", "4", "5", "7", "8"]
    assert pointer_targets(ELEMENTS, frozenset({"6"})) == ["1", "4", "5", "6", "7", "8"]
    calls = [parse_action(c) for c in ("click('3')", "focus('2')", "click('4')",
                                       "fill('8', 'x')", "hover('6')", "click('99')")]
    # a fill is no pointer action; an element the view does not show is not judged
    assert inert_bids(calls, ELEMENTS, frozenset()) == ["3", "2", "6"]
    assert inert_bids(calls, ELEMENTS, frozenset({"6"})) == ["3", "2"]
    assert inert_bids(calls, None, frozenset()) == []


def test_the_closest_targets_share_most_words_with_the_goal_and_leave_the_page_itself_out(
) -> None:
    # 'getsource()' → #inspect.getsource shares inspect and getsource (its fragment),
    # 'Source code' source and code, the label object; equals in view order. The page's
    # own title link (inspect, object) only reloads it.
    assert closest_targets(GOAL, ELEMENTS, frozenset(), page_url=PAGE + "#top") == [
        "4", "5", "8"]
    assert closest_targets(GOAL, ELEMENTS, frozenset()) == ["1", "4", "5", "8"]
    assert closest_targets(GOAL, ELEMENTS, frozenset(), k=1, page_url=PAGE) == ["4"]
    assert closest_targets("Press the big red button.", ELEMENTS, frozenset()) == []
