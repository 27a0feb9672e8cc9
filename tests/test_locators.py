"""Locators on captured trees: every element found again in its own tree, and in the same
page changed as a fresh load changes it (bids shifted, a list reordered, a dialog added),
never found by a guess when it changed in what identifies it."""

from __future__ import annotations

import re

import pytest

from linewise.axtree import line_depth
from linewise.locators import (
    Resolution,
    TreeIndex,
    describe,
    element_state,
    locate,
    resolve,
)
from linewise.records import StepRecord, TargetLocator
from linewise.runtime.replay.program import locators_of
from tests.support.paths import TREES

TREE_NAMES = sorted(p.name for p in TREES.glob("*.txt"))

_NUMBERED_BID = re.compile(r"^(\t*)\[([A-Za-z]*)(\d+)\] ")

BANNER = [
    "\t[1] region 'Cookie notice'",
    "\t\t[2] heading 'We use cookies'",
    "\t\tStaticText 'This site stores cookies to remember you.'",
    "\t\t[3] button 'Accept all'",
    "\t\t[4] link 'Privacy policy'",
]
"""What a fresh load may add above a page: its own elements, a heading, text."""


def tree(name: str) -> list[str]:
    return (TREES / name).read_text(encoding="utf-8").splitlines()


def line_index(lines: list[str], pattern: str) -> int:
    """The index of the first line matching ``pattern``."""
    return next(i for i, line in enumerate(lines) if re.search(pattern, line))


def bid_at(lines: list[str], pattern: str) -> str:
    """The bid of the first line matching ``pattern``."""
    match = re.search(r"\[(\w+)\]", lines[line_index(lines, pattern)])
    assert match is not None
    return match.group(1)


def block(lines: list[str], start: int) -> range:
    """The line ``start`` and the lines of its subtree."""
    end = start + 1
    while end < len(lines) and line_depth(lines[end]) > line_depth(lines[start]):
        end += 1
    return range(start, end)


def shifted(lines: list[str], by: int = 1000) -> list[str]:
    """The tree with ``by`` added to every numbered bid (``a5`` becomes ``a1005``)."""
    return [_NUMBERED_BID.sub(lambda m: f"{m[1]}[{m[2]}{int(m[3]) + by}] ", line)
            for line in lines]


def renumbered_in_order(changed: list[str], original: list[str]) -> list[str]:
    """``changed`` with the bids of ``original`` given out in document order, as a fresh
    load marks the page: an element that moved takes the bid of the place it moved to."""
    bids = iter(re.findall(r"^\t*\[(\w+)\] ", "\n".join(original), re.MULTILINE))
    return [re.sub(r"^(\t*)\[\w+\] ", lambda m: f"{m[1]}[{next(bids)}] ", line)
            for line in changed]


def swapped(lines: list[str], first: int, second: int) -> list[str]:
    """The tree with the subtrees at lines ``first`` < ``second`` (siblings) swapped."""
    a, b = block(lines, first), block(lines, second)
    return (lines[: a.start] + lines[b.start: b.stop] + lines[a.stop: b.start]
            + lines[a.start: a.stop] + lines[b.stop:])


def found(bid: str) -> Resolution:
    """A resolution to ``bid``, for comparing the found bid and reason at once."""
    return Resolution(bid, None, "")


def same(resolution: Resolution) -> Resolution:
    return Resolution(resolution.bid, resolution.reason, "")


def located(lines: list[str], bid: str) -> TargetLocator:
    locator = locate(lines, bid)
    assert locator is not None, bid
    return locator


# --- every element of every captured tree ---------------------------------------------


@pytest.mark.parametrize("name", TREE_NAMES)
def test_every_element_resolves_to_itself_in_its_own_tree(name: str) -> None:
    lines = tree(name)
    index = TreeIndex(lines)
    bids = index.bids()
    assert bids == list(dict.fromkeys(re.findall(r"^\t*\[(\w+)\] ", "\n".join(lines),
                                                 re.MULTILINE)))
    several = 0
    for bid in bids:
        locator = index.locate(bid)
        assert locator is not None
        several += locator.matches > 1
        resolution = index.resolve(locator)
        assert (resolution.bid, resolution.reason) == (bid, None), (describe(locator),
                                                                    resolution)
    # the functions read the tree per call: all of a small tree, a sample of a large one
    for bid in bids if len(bids) < 100 else bids[:: len(bids) // 5]:
        locator = located(lines, bid)
        assert locator == index.locate(bid)
        assert resolve(locator, lines).bid == bid
    if name.startswith("docs-") or name == "miniwob-email-inbox.txt":
        assert several, "these trees have equal elements: their ordinals are exercised"


def test_locate_an_absent_bid_is_none() -> None:
    assert locate(tree("page-form.txt"), "999") is None
    assert locate(tree("page-form.txt"), "a") is not None  # a frame is an element


# --- a fresh load that shifts every bid ------------------------------------------------


@pytest.mark.parametrize("name", TREE_NAMES)
def test_a_banner_above_shifts_every_bid_and_every_element_is_found(name: str) -> None:
    lines = tree(name)
    assert lines[0].startswith("RootWebArea")
    fresh = [lines[0], *BANNER, *shifted(lines[1:])]
    original, index = TreeIndex(lines), TreeIndex(fresh)
    renamed = dict(zip(original.bids(), TreeIndex(shifted(lines)).bids(), strict=True))
    for bid in original.bids():
        locator = original.locate(bid)
        assert locator is not None
        resolution = index.resolve(locator)
        assert (resolution.bid, resolution.reason) == (renamed[bid], None), (
            describe(locator), resolution)


def test_the_banner_gives_the_elements_before_the_first_heading_a_heading() -> None:
    """The heading only narrows: elements found by their place are still found when the
    heading they were under is another."""
    lines = tree("docs-json.txt")
    fresh = [lines[0], *BANNER, *shifted(lines[1:])]
    recorded = located(lines, "176")
    # the page's top and bottom bars have the same links; the top one is under no heading
    assert (recorded.heading, recorded.ordinal, recorded.matches) == (None, 0, 2)
    assert located(fresh, "1176").heading == "We use cookies"
    resolution = resolve(recorded, fresh)
    assert same(resolution) == found("1176")
    assert resolution.detail == (
        "found [1176]: link 'modules' is the 1st of 2 equal elements, as recorded")


# --- a list in another order -------------------------------------------------------------


def test_a_link_of_a_reordered_list_is_found_at_its_new_place() -> None:
    lines = tree("docs-json.txt")
    index_item = line_index(lines, r"\[173\] listitem")
    modules_item = line_index(lines, r"\[175\] listitem")
    fresh = renumbered_in_order(swapped(lines, index_item, modules_item), lines)
    # the bids went with the places, not the links: bids alone would click 'index'
    assert bid_at(fresh, r"link 'modules'") == "174"
    assert bid_at(fresh, r"link 'index'") == "176"
    assert same(resolve(located(lines, "176"), fresh)) == found("174")
    assert same(resolve(located(lines, "174"), fresh)) == found("176")
    # the links of the same name in the page's bottom bar are not taken for them
    bottom = bid_at(lines[index_item + 10:], r"link 'modules'")
    assert bottom != "176"
    assert same(resolve(located(lines, bottom), fresh)) == found(bottom)


def test_unnamed_textboxes_are_found_by_their_label_when_the_fields_swap() -> None:
    lines = tree("miniwob-login-user.txt")
    username, password = located(lines, "19"), located(lines, "22")
    assert (username.role, username.name, username.label) == ("textbox", "", "Username")
    assert password.label == "Password"
    assert username.matches == password.matches == 1
    fresh = renumbered_in_order(
        swapped(lines, line_index(lines, r"\[17\] paragraph"),
                line_index(lines, r"\[20\] paragraph")), lines)
    assert "StaticText 'Password'" in fresh[3]
    assert same(resolve(username, fresh)) == found("22")
    assert same(resolve(password, fresh)) == found("19")


def test_a_relabelled_unnamed_textbox_is_not_found() -> None:
    lines = tree("miniwob-login-user.txt")
    fresh = [line.replace("'Password'", "'Passphrase'") for line in lines]
    resolution = resolve(located(lines, "22"), fresh)
    assert resolution == Resolution(
        None, "none", "no element textbox labelled 'Password' in the page")
    assert same(resolve(located(lines, "19"), fresh)) == found("19")


def test_a_dialog_with_a_field_like_the_recorded_one_leaves_it_found_by_context() -> None:
    lines = tree("miniwob-login-user.txt")
    dialog = [
        "\t[90] dialog 'Session expired'",
        "\t\t[91] LabelText ''",
        "\t\t\tStaticText 'Username'",
        "\t\t[92] textbox ''",
        "\t\t[93] button 'Sign in again'",
    ]
    fresh = [lines[0], *dialog, *lines[1:]]
    assert located(fresh, "92").context == ("dialog 'Session expired'",)
    assert same(resolve(located(lines, "19"), fresh)) == found("19")
    assert same(resolve(located(fresh, "92"), fresh)) == found("92")
    # a single candidate is the element whatever its context: the context only chooses
    # among several (the dialog's field, recorded, is the page's once the dialog is gone)
    assert same(resolve(located(fresh, "92"), lines)) == found("19")


# --- equal elements ---------------------------------------------------------------------


def test_equal_elements_whose_count_changed_are_several() -> None:
    lines = tree("miniwob-social-media.txt")
    first = located(lines, "24")
    assert (first.role, first.label, first.ordinal, first.matches) == (
        "image", "Semper consequat in quis.", 0, 4)
    assert describe(first) == "image labelled 'Semper consequat in quis.' (1st of 4)"
    fewer = [line for line in lines if "[25] image" not in line]
    assert resolve(first, fewer) == Resolution(
        None, "several",
        "3 elements image labelled 'Semper consequat in quis.' match equally, the "
        "recording had 4")
    more = lines[:]
    more.insert(line_index(lines, r"\[26\] image") + 1, "\t\t[27] image ''")
    assert resolve(located(lines, "28"), more).reason == "several"
    # the same number of equal elements: the place is meaningful
    assert same(resolve(located(lines, "28"), shifted(lines))) == found("1028")


def test_a_changed_count_is_settled_by_the_heading_and_a_place_it_contradicts_is_not() -> None:
    lines = tree("docs-json.txt")
    index = TreeIndex(lines)
    strs = [loc for bid in index.bids() if (loc := index.locate(bid)) is not None
            and (loc.role, loc.name) == ("link", "str")]
    assert [loc.heading for loc in strs].count("Encoders and Decoders") == 3
    alone = next(loc for loc in strs if loc.heading == "Character Encodings")
    later = next(loc for loc in strs if loc.heading == "Encoders and Decoders"
                 and loc.ordinal == 8)
    assert alone.matches == later.matches == 10
    dropped = block(lines, line_index(lines, r"\[799\] link 'str'"))
    fewer = lines[: dropped.start] + lines[dropped.stop:]
    # one less: the only 'str' link under its heading is still it; one of three is not
    assert same(resolve(alone, fewer)) == found(alone.bid)
    assert resolve(later, fewer) == Resolution(
        None, "several", "9 elements link 'str' match equally, the recording had 10")
    # one less above and one more below: as many as recorded, but the place now holds
    # a link under another heading than the recorded one
    after = block(fewer, line_index(fewer, rf"\[{alone.bid}\] link 'str'"))
    copy = shifted(fewer[after.start: after.stop], by=5000)
    moved = fewer[: after.stop] + copy + fewer[after.stop:]
    resolution = resolve(later, moved)
    assert resolution.reason == "several" and resolution.bid is None
    assert "the 9th is not under heading 'Encoders and Decoders'" in resolution.detail


def test_several_in_another_context_or_at_a_place_that_is_none_are_several() -> None:
    lines = tree("docs-json.txt")
    recorded = located(lines, "176")
    elsewhere = recorded.model_copy(update={"context": ("navigation 'site map'",),
                                            "heading": "Contents"})
    assert resolve(elsewhere, lines) == Resolution(
        None, "several", "2 elements link 'modules' match, and none has the recorded "
        "context")
    beyond = recorded.model_copy(update={"heading": "Contents", "ordinal": 2})
    assert resolve(beyond, lines).reason == "several"


# --- what identifies an element changed ------------------------------------------------


def test_a_renamed_button_is_none_never_its_look_alike() -> None:
    lines = tree("page-form.txt")
    recorded = located(lines, bid_at(lines, r"button 'Click me'"))
    fresh = [line.replace("button 'Click me'", "button 'Click here'") for line in lines]
    assert resolve(recorded, fresh) == Resolution(
        None, "none", "no element button 'Click me' in the page")


def test_the_same_name_with_another_role_is_a_changed_role() -> None:
    lines = tree("miniwob-book-flight.txt")
    recorded = located(lines, "32")
    assert (recorded.role, recorded.name) == ("button", "Search")
    fresh = [line.replace("[32] button 'Search'", "[32] link 'Search'") for line in lines]
    assert resolve(recorded, fresh) == Resolution(
        None, "changed_role", "no element button 'Search' in the page, only link 'Search'")


def test_names_are_compared_whitespace_collapsed() -> None:
    lines = tree("page-form.txt")
    recorded = located(lines, bid_at(lines, r"button 'Double click me'"))
    fresh = [line.replace("'Double click me'", "'Double  click\\nme '") for line in lines]
    assert same(resolve(recorded, fresh)) == found(recorded.bid)


# --- frames -----------------------------------------------------------------------------


def test_an_element_in_a_frame_is_found_only_in_the_frame_of_that_name() -> None:
    lines = tree("page-form.txt")
    frame = line_index(lines, r"\[a\] Iframe 'Inner frame'")
    inner = located(lines, "a5")
    assert inner.frames == ("Iframe 'Inner frame'",)
    assert inner.context == () and inner.heading is None  # the frame's own document
    assert located(lines, bid_at(lines, r"\[34\] paragraph")).heading == "Sign up"
    assert describe(inner) == "button 'Inner button' in frame Iframe 'Inner frame'"

    # another frame before it with a button of the same name
    ad = [line.replace("[a", "[b").replace("'Inner frame'", "'Ad'")
          for line in lines[block(lines, frame).start: block(lines, frame).stop]]
    with_ad = lines[:frame] + ad + lines[frame:]
    assert same(resolve(inner, with_ad)) == found("a5")

    # the frame renamed: not found, not even as the button of the same name in the other
    renamed = [line.replace("'Inner frame'", "'Outer frame'") for line in with_ad]
    assert resolve(inner, renamed) == Resolution(
        None, "none", "no element button 'Inner button' in frame Iframe 'Inner frame' "
        "in the page")

    # the button out of its frame, in the page itself: not it either
    top = [*lines[:frame], "\t[35] button 'Inner button'", *lines[block(lines, frame).stop:]]
    assert resolve(inner, top).reason == "none"
    assert resolve(located(top, "35"), lines).reason == "none"


# --- describe and element_state -----------------------------------------------------------


def test_describe_real_elements() -> None:
    docs = tree("docs-json.txt")
    assert describe(located(docs, "176")) == (
        "link 'modules' in navigation 'related navigation' (1st of 2)")
    first_str = located(docs, "799")
    assert describe(first_str) == "link 'str', under heading 'Basic Usage' (1st of 10)"
    form = tree("page-form.txt")
    assert describe(located(form, bid_at(form, r"option 'green'"))) == (
        "option 'green' in combobox 'Color', under heading 'Sign up'")
    login = tree("miniwob-login-user.txt")
    assert describe(located(login, "19")) == "textbox labelled 'Username'"
    assert describe(located(login, "23")) == "button 'Login'"
    unlabelled = located(["RootWebArea 'x'", "\t[3] combobox '' value='red'"], "3")
    assert (unlabelled.value, unlabelled.label) == ("red", None)
    assert describe(unlabelled) == "combobox with value 'red'"


def test_element_state_reads_the_state_properties_of_real_lines() -> None:
    checkboxes = tree("miniwob-click-checkboxes.txt")
    assert element_state(checkboxes, "19") == {"checked": "false"}
    assert element_state(checkboxes, "28") == {}
    form = tree("page-form.txt")
    assert element_state(form, bid_at(form, r"combobox 'Color'")) == {
        "value": "red", "expanded": "False"}
    assert element_state(form, bid_at(form, r"option 'red'")) == {"selected": "True"}
    assert element_state(form, bid_at(form, r"textbox 'Bio'")) == {"value": "old text"}
    assert element_state(form, "999") == {}
    # focused moves with every click: it is not state
    login = tree("miniwob-login-user.txt")
    typed = [line.replace("[19] textbox ''", "[19] textbox '' value='kenda, jr', focused")
             for line in login]
    assert element_state(typed, "19") == {"value": "kenda, jr"}
    assert element_state(typed, "1") == {}  # '[1]' is in no line: '[19]' is not it


def test_an_unnamed_unlabelled_list_is_found_whatever_option_it_shows() -> None:
    """MiniWoB++'s choose-list shows another default option on every seed: the list's
    value tells equal lists apart, and never rules out the only one."""
    recorded = ["RootWebArea 'Choose List Task'",
                "\t[14] combobox '' value='Angola', hasPopup='menu', expanded=False",
                "\t[24] button 'Submit'"]
    locator = locate(recorded, "14")
    assert locator is not None and locator.label is None and locator.value == "Angola"
    other_seed = [line.replace("'Angola'", "'Djibouti'") for line in recorded]
    assert resolve(locator, other_seed).bid == "14"
    two = [*other_seed[:2], "\t[30] combobox '' value='Peru', hasPopup='menu', expanded=False",
           other_seed[2]]
    assert resolve(locator, two).reason == "several"
    with_it = [*two[:2], "\t[31] combobox '' value='Angola', hasPopup='menu', expanded=False",
               *two[2:]]
    assert resolve(locator, with_it).bid == "31"


def test_an_unnamed_clickable_is_known_by_the_words_inside_it() -> None:
    """MiniWoB++'s links are unnamed clickable spans with their words inside: those words
    find the link again when the text around it and every bid changed, and a span with
    other words is never taken for it."""
    recorded = ["RootWebArea 'Click Tab Task'",
                "\t[25] tabpanel '1'",
                "\t\t[26] paragraph ''",
                "\t\t\tStaticText 'In'",
                "\t\t\t[27] generic, clickable",
                "\t\t\t\tStaticText 'in'",
                "\t\t\tStaticText 'Nulla scelerisque dignissim'",
                "\t\t\t[30] generic, clickable",
                "\t\t\t\tStaticText 'lorem.'",
                "\t\t\tStaticText 'Tellus.'"]
    locator = locate(recorded, "30")
    assert locator is not None
    assert (locator.text, locator.label) == ("lorem.", "Nulla scelerisque dignissim")
    assert describe(locator) == "generic showing 'lorem.' in tabpanel '1'"
    assert locate(recorded, "26").text == "In in Nulla scelerisque dignissim lorem. Tellus."
    fresh = ["RootWebArea 'Click Tab Task'",
             "\t[40] tabpanel '1'",
             "\t\t[41] paragraph ''",
             "\t\t\t[42] generic, clickable",
             "\t\t\t\tStaticText 'lorem.'",
             "\t\t\tStaticText 'Vel risus.'",
             "\t\t\t[43] generic, clickable",
             "\t\t\t\tStaticText 'in'"]
    assert resolve(locator, fresh).bid == "42"
    renamed = [line.replace("'lorem.'", "'ipsum.'") for line in fresh]
    assert resolve(locator, renamed).reason == "none"


def test_a_field_is_never_known_by_the_text_typed_into_it() -> None:
    typed = ["RootWebArea 'x'", "\t[5] textbox ''", "\t\tStaticText 'kenda'",
             "\t[6] generic", "\t\t[7] spinbutton ''", "\t\t\tStaticText '12'"]
    assert locate(typed, "5").text is None
    assert locate(typed, "7").text is None
    assert locate(typed, "6").text == "12"


def test_a_recorded_step_s_locators_are_read_again_from_its_tree() -> None:
    """A locator an older version recorded lacks the words inside an unnamed element;
    the step's own tree gives them, and a trace with no tree keeps what it recorded."""
    tree = ["RootWebArea 'Click Tab Task'", "\t[25] tabpanel '1'",
            "\t\t[30] generic, clickable", "\t\t\tStaticText 'lorem.'"]
    old = TargetLocator(bid="30", role="generic", context=("tabpanel '1'",))
    step = StepRecord(episode_id="e", task_id="t", index=0, url="http://x/", observation="",
                      action="click('30')", targets=[old],
                      axtree="\n".join(f"{n}|{line}" for n, line in enumerate(tree, 1)))
    [again] = locators_of(step)
    assert again.text == "lorem." and again.bid == "30"
    treeless = step.model_copy(update={"axtree": ""})
    assert locators_of(treeless) == [old]
