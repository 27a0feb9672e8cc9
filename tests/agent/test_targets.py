"""Which elements a click can act on, and which of those are closest to the goal."""

from __future__ import annotations

from linewise.agent.action_parser import parse_action
from linewise.agent.targets import (
    closest_targets,
    entry_links,
    inert_bids,
    named_words,
    offered_targets,
    pointed_entry_links,
    pointer_targets,
)
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
    assert closest_targets(GOAL, ELEMENTS, frozenset()) == ["4", "1", "5", "8"]  # named first
    assert closest_targets(GOAL, ELEMENTS, frozenset(), k=1, page_url=PAGE) == ["4"]
    assert closest_targets("Press the big red button.", ELEMENTS, frozenset()) == []


def test_what_the_goal_names_comes_before_what_shares_more_words_and_a_destination_once(
) -> None:
    page = "http://docs/library/doctest.html"
    lines = [
        "RootWebArea 'doctest'",
        f"\t[10] link 'option flags', url='{page}#doctest-options'",
        f"\t[11] link 'Option Flags', url='{page}#doctest-options'",
        "\t[12] term 'doctest.ELLIPSIS'",
        f"\t[13] link 'ELLIPSIS', url='{page}#doctest.ELLIPSIS'",
        f"\t[14] link 'ELLIPSIS', url='{page}#doctest.ELLIPSIS'",
        "\t[15] link 'RewriteMap', url='http://docs/mod/mod_rewrite.html#rewritemap'",
        "\t[16] link 'Ellipsis', url='http://docs/library/constants.html#Ellipsis'",
    ]
    elements = element_lines(lines, [str(i) for i in range(10, 17)])
    goal = "Open the entry of doctest's ELLIPSIS option flag."
    assert named_words(goal) == {"ellipsis"}
    # the section link shares doctest, option and flag; the entry's link is named
    assert closest_targets(goal, elements, frozenset(), page_url=page) == ["13", "16", "10"]
    assert named_words("Open the entry of the RewriteMap directive, not asyncio.run()") == {
        "rewritemap", "asyncio.run"}
    # Apache lower-cases its anchors: the fragment names the directive
    assert closest_targets("Where is RewriteMap set?", elements, frozenset())[0] == "15"
    assert named_words("Which Valgrind release added Solaris? Open its entry.") == set()


SOCKET = "http://docs/library/socket.html"
REFERENCE = [
    "RootWebArea 'socket'",
    f"\t[1] link 'socket', url='{SOCKET}#module-socket'",
    "\t[2] DescriptionList ''",
    "\t\t[3] term 'socket.create_connection(address, timeout=None)'",
    "\t\t\tStaticText 'create_connection'",
    "\t\t[4] definition ''",
    "\t\t\t[5] paragraph ''",
    "\t\t\t\tStaticText 'Connect to a TCP service.'",
    f"\t\t\t\t[6] link 'timeout', url='{SOCKET}#socket.timeout'",
    "\t\t\t[7] DescriptionList ''",
    "\t\t\t\t[8] term 'close()'",
    "\t\t\t\t[9] definition ''",
    "\t[10] heading 'Option Flags'",
    "\t[11] paragraph ''",
    "\t[12] heading 'PidFile Directive'",
    "\t[13] paragraph ''",
    f"\t[20] link 'create_connection()', url='{SOCKET}#socket.create_connection'",
    f"\t[21] link 'create_connection()', url='{SOCKET}#socket.create_connection'",
    f"\t[22] link 'close()', url='{SOCKET}#socket.socket.close'",
    f"\t[23] link 'close()', url='{SOCKET}#socket.close'",
    f"\t[24] link 'Option Flags', url='{SOCKET}#option-flags'",
    "\t[25] link 'PidFile', url='http://docs/mod/mpm_common.html#pidfile'",
    f"\t[26] link 'PidFile', url='{SOCKET}#pidfile'",
    f"\t[27] link 'timeout', url='{SOCKET}#timeout'",
]


def test_the_links_that_open_the_entry_an_element_lies_in() -> None:
    # a definition's text, its list and its term all lie in the entry socket.create_connection;
    # one link per anchor, and the term's parameter (timeout) is no name of the entry
    for inside in ("2", "3", "4", "5"):
        assert entry_links(REFERENCE, inside, SOCKET) == ["20"], inside
    # a method's term names the method alone: anchors under a class, in page order, after
    # an anchor that is the name itself
    assert entry_links(REFERENCE, "9", SOCKET) == ["22", "23"]
    assert entry_links(REFERENCE, "9", SOCKET, k=1) == ["22"]
    exact = [*REFERENCE, f"\t[28] link 'close', url='{SOCKET}#close'"]
    assert entry_links(exact, "9", SOCKET) == ["28", "22"]
    # a section: its title as a slug; Apache's: the heading's first word, on this page only
    assert entry_links(REFERENCE, "11", SOCKET) == ["24"]
    assert entry_links(REFERENCE, "13", SOCKET) == ["26"]
    assert entry_links(REFERENCE, "1", SOCKET) == []  # before any entry
    assert entry_links(REFERENCE, "99", SOCKET) == []  # not on the page


def test_only_an_element_that_answers_no_click_is_given_its_entry_links() -> None:
    links = pointed_entry_links(parse_action("click('5')"), REFERENCE, frozenset(), SOCKET)
    assert [(bid, line.name) for bid, line in links.items()] == [("20", "create_connection()")]
    assert pointed_entry_links(parse_action("hover('4')"), REFERENCE, frozenset(), SOCKET)
    # a link answers clicks; so does an element the page listens to; a fill points at nothing
    for call, clickable in (("click('6')", frozenset()), ("click('5')", frozenset({"5"})),
                            ("fill('5', 'x')", frozenset())):
        assert pointed_entry_links(parse_action(call), REFERENCE, clickable, SOCKET) == {}
    assert pointed_entry_links(None, REFERENCE, frozenset(), SOCKET) == {}


def test_after_a_click_inside_an_entry_the_links_the_goal_names_come_before_the_entrys() -> None:
    elements = element_lines(REFERENCE, [str(i) for i in range(1, 28)])
    entry = entry_links(REFERENCE, "5", SOCKET)
    paraphrased = "Which helper reaches a TCP service? Open its entry."
    assert offered_targets(paraphrased, elements, frozenset(), entry, SOCKET) == ["20"]
    # the goal names socket.close: its link first, then the entry the click lay in
    named = "Open the entry of socket.close()."
    assert offered_targets(named, elements, frozenset(), entry, SOCKET) == ["23", "20"]
    # no entry: the clickable elements closest to the goal, as before
    assert offered_targets(named, elements, frozenset(), (), SOCKET) == closest_targets(
        named, elements, frozenset(), page_url=SOCKET)
