"""Observation filters on real trees captured from MiniWoB++ and documentation pages."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.agent.filters.line_retriever import split_windows
from linewise.agent.filters.registry import (
    FilterContext,
    check_filter_name,
    filter_maker,
    filter_names,
    get_filter,
    register_filter,
    unregister_filter,
)
from linewise.agent.filters.retriever.cost_gate import CostGate, Prices
from linewise.agent.filters.retriever.recall_guard import guard_lines, guarded_bids
from linewise.agent.filters.truncate import NoFilter, TruncateFilter
from linewise.agent.filters.view.ranges import (
    lines_of,
    merge_ranges,
    parse_ranges,
    ranges_of,
)
from linewise.agent.filters.view.structure import rebuild_with_structure
from linewise.agent.filters.view.tree import LineTree
from linewise.errors import ConfigError, RangeParseError
from linewise.settings import FilterSettings
from linewise.tokens import count_tokens
from tests.support.paths import TREES

BID = re.compile(r"^\t*\[([A-Za-z0-9]+)\] ")


def tree_lines(name: str) -> list[str]:
    return (TREES / name).read_text().splitlines()


# -- range parsing


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("<think>see 4</think><answer>[(1,3), (20,25)]</answer>", [(1, 3), (20, 25)]),
        ("<answer>[[5,3],[4,9]]</answer>", [(3, 9)]),
        ("<answer>[5, 7, 9]</answer>", [(5, 5), (7, 7), (9, 9)]),
        ('{"think": "x", "ranges": [[1, 2], [10, 12]]}', [(1, 2), (10, 12)]),
        ("<answer>lines 3-5 and 9</answer>", [(3, 5), (9, 9)]),
        ("<answer>(4, 2)</answer>", [(2, 4)]),
        ('<answer>["2-4", 8]</answer>', [(2, 4), (8, 8)]),
        ("<answer>[(1,3), (3,6), (7,7)]</answer>", [(1, 7)]),
        ("<answer>[(90, 500), (0, 2)]</answer>", [(1, 2), (90, 100)]),
        ("<answer>[(1,3), (2", [(1, 3)]),  # cut off mid-answer
        ("```json\n[[10, 11]]\n```", [(10, 11)]),
    ],
)
def test_parse_ranges(answer: str, expected: list[tuple[int, int]]) -> None:
    assert parse_ranges(answer, 100) == expected


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("<think>only thoughts about line 4</think>", "no line numbers"),
        ("<think>unfinished 4", "no <answer>"),
        ("<answer>[]</answer>", "no line numbers"),
        ("<answer>[(300, 400)]</answer>", "outside the observation"),
    ],
)
def test_unusable_answers_say_why(answer: str, message: str) -> None:
    with pytest.raises(RangeParseError, match=message):
        parse_ranges(answer, 100)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=1, max_value=500))
def test_parser_never_crashes_and_stays_in_bounds(text: str, n_lines: int) -> None:
    try:
        ranges = parse_ranges(text, n_lines)
    except RangeParseError:
        return
    assert ranges == merge_ranges(ranges)
    for lo, hi in ranges:
        assert 1 <= lo <= hi <= n_lines


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-5, 300), st.integers(-5, 300)), min_size=1, max_size=12),
    st.sampled_from(["[{}]", "<answer>[{}]</answer>", "<think>x 3</think>\n<answer>[{}]</answer>"]),
    st.sampled_from(["({}, {})", "[{}, {}]", '"{}-{}"']),
    st.integers(min_value=1, max_value=250),
)
def test_parser_recovers_every_written_range(
    pairs: list[tuple[int, int]], outer: str, inner: str, n_lines: int
) -> None:
    body = ", ".join(inner.format(abs(a), abs(b)) for a, b in pairs)
    expected_lines = {
        n for a, b in pairs for n in range(min(abs(a), abs(b)), max(abs(a), abs(b)) + 1)
        if 1 <= n <= n_lines
    }
    try:
        ranges = parse_ranges(outer.format(body), n_lines)
    except RangeParseError:
        assert not expected_lines
        return
    assert set(lines_of(ranges)) == expected_lines


def test_ranges_of_is_the_inverse_of_lines_of() -> None:
    assert ranges_of([5, 1, 2, 3, 9, 10]) == [(1, 3), (5, 5), (9, 10)]
    assert lines_of(ranges_of([4, 7, 8])) == [4, 7, 8]


# -- the structure-preserving rebuild


@pytest.mark.parametrize(
    "name", ["miniwob-email-inbox.txt", "miniwob-social-media.txt", "docs-json.txt"]
)
def test_structure_rebuild_is_a_valid_smaller_tree(name: str) -> None:
    lines = tree_lines(name)
    tree = LineTree(lines)
    bid_lines = [i for i, line in enumerate(lines) if BID.match(line)]
    kept = set(bid_lines[len(bid_lines) // 3 : len(bid_lines) // 3 + 4]) | {len(lines) - 1}
    view = rebuild_with_structure(tree, kept)
    out = view.text.split("\n")

    # every kept line is there unchanged, and every ancestor of it, in order
    for k in kept:
        assert lines[k] in out
        for a in tree.ancestors(k):
            assert a + 1 in view.context_lines or a in kept
    # indentation is valid: each line at most one level deeper than the line before
    depths = [len(line) - len(line.lstrip("\t")) for line in out]
    assert depths[0] == 0
    assert all(b <= a + 1 for a, b in itertools.pairwise(depths))
    # markers count exactly the lines not shown
    marker = re.compile(r"… (\d+) lines? omitted")
    counted = sum(int(m.group(1)) for line in out if (m := marker.search(line)))
    assert counted == view.omitted_lines == len(lines) - len(kept) - len(view.context_lines)
    # bids are unchanged and only shown bids appear
    shown_bids = {m.group(1) for line in out if (m := BID.match(line))}
    all_bids = {m.group(1) for line in lines if (m := BID.match(line))}
    assert shown_bids <= all_bids
    # it cuts lines, not only text
    assert len(out) < len(lines) / 2 or len(lines) < 80


def _news_lines() -> list[str]:
    """A NEWS file as Chromium shows a DocBook ``literallayout``: one paragraph of text
    runs, each release a title over a line of tildes."""
    lines = ["RootWebArea 'NEWS'", "\t[7] paragraph ''"]
    for release in ("3.12.0", "3.11.0", "3.10.0"):
        lines += [f"\t\tStaticText 'Release {release} (22 September 2015)'",
                  "\t\tStaticText '~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~'"]
        lines += [f"\t\tStaticText '* change {n} of {release}'" for n in range(40)]
        lines += [f"\t\t[{release[2:4]}] link 'bug {release}', url='https://bugs/{release}'",
                  f"\t\t\tStaticText 'bug {release}'"]
    return lines


def test_a_kept_line_of_plain_text_brings_its_section_title() -> None:
    lines = _news_lines()
    tree = LineTree(lines)
    bullet = lines.index("\t\tStaticText '* change 30 of 3.11.0'")
    link_text = lines.index("\t\t\tStaticText 'bug 3.11.0'")
    view = rebuild_with_structure(tree, {bullet, link_text})
    out = view.text.split("\n")
    title = lines.index("\t\tStaticText 'Release 3.11.0 (22 September 2015)'")
    assert out[:5] == [lines[0], lines[1], "\t\t… 44 lines omitted …", lines[title],
                       "\t\t… 31 lines omitted …"]
    # one title for both lines; the link is the text's ancestor
    assert view.context_lines == [1, 2, title + 1, link_text]
    assert "Release 3.12.0" not in view.text and "Release 3.10.0" not in view.text
    # A line above every title, and a page without titles, add nothing.
    assert rebuild_with_structure(tree, {1}).context_lines == [1]
    plain = [line for line in lines if "~~~" not in line]
    assert rebuild_with_structure(LineTree(plain), {40}).context_lines == [1, 2]


def test_structure_rebuild_cuts_a_large_page() -> None:
    lines = tree_lines("docs-functions.txt")
    tree = LineTree(lines)
    target = next(i for i, line in enumerate(lines) if "heading 'Built-in Functions'" in line)
    view = rebuild_with_structure(tree, range(target, target + 20))
    full, shown = count_tokens("\n".join(lines)), count_tokens(view.text)
    assert shown < 0.05 * full
    assert len(view.text.splitlines()) < 40
    assert lines[target] in view.text


def test_context_lines_are_shortened() -> None:
    lines = [
        "RootWebArea 'A page with a rather long title that keeps going and going', focused",
        "\t[5] navigation 'Primary navigation with many words in its accessible name'",
        "\t\t[6] link 'Home'",
        "\t\t[7] link 'About'",
    ]
    view = rebuild_with_structure(LineTree(lines), [3])
    out = view.text.split("\n")
    assert out[0].startswith("RootWebArea 'A page with a rather long title") and "…'" in out[0]
    assert "focused" not in out[0]
    assert out[1].startswith("\t[5] navigation 'Primary") and out[3] == lines[3]
    assert out[2] == "\t\t… 1 line omitted …"


# -- truncation, none


async def test_truncate_keeps_the_top_within_budget() -> None:
    lines = tree_lines("docs-functions.txt")
    observation = FilterInput(goal="g", lines=lines)
    result = await TruncateFilter(max_tokens=2000).apply(observation)
    assert result.tokens_shown <= 2000 + 30
    assert result.kept_lines == list(range(1, len(result.kept_lines) + 1))
    assert result.text.splitlines()[-1] == (
        f"… {len(lines) - len(result.kept_lines)} more lines cut to fit 2000 tokens …")
    assert 0.5 < result.reduction < 1
    small = await TruncateFilter(max_tokens=40_000).apply(
        FilterInput(goal="g", lines=tree_lines("miniwob-book-flight.txt")))
    assert small.reduction == 0 and "cut to fit" not in small.text
    none = await NoFilter().apply(observation)
    assert none.text == "\n".join(lines) and none.reduction == 0


# -- recall guard, cost gate, windows


def test_recall_guard_keeps_focus_actions_and_error_elements() -> None:
    lines = tree_lines("miniwob-book-flight.txt")
    tree = LineTree(lines)
    # The loop passes the element the last action failed on as a bid, never as text to
    # be parsed: the error's wording is not read.
    observation = FilterInput(
        goal="g", lines=lines, focused_bid="24", must_keep_bids=["32", "30"],
        last_action_error="Element with bid '31': not visible",
    )
    assert guarded_bids(observation) == ["24", "32", "30"]
    kept = guard_lines(tree, observation)
    for bid in ("24", "30", "32"):
        assert tree.bid_line[bid] in kept
    assert all(BID.match(lines[i]) or lines[i].lstrip().startswith("StaticText") for i in kept)


def test_cost_gate_follows_appendix_b() -> None:
    gate = CostGate(Prices(action_input=2.0, retriever_input=0.4, retriever_output=0.0))
    assert gate.alpha_threshold == pytest.approx(0.8)
    assert not gate.decide(tokens_full=150, overhead_tokens=400, answer_tokens=0).retrieve
    assert gate.decide(tokens_full=5000, overhead_tokens=400, answer_tokens=0).retrieve
    for _ in range(5):
        gate.observe(0.9)  # retrieval keeps almost everything: it no longer pays
    decision = gate.decide(tokens_full=5000, overhead_tokens=400, answer_tokens=0)
    assert not decision.retrieve and "above the break-even" in decision.reason
    same_price = CostGate(Prices(action_input=1.0, retriever_input=1.0, retriever_output=1.0))
    assert not same_price.decide(10_000, 100, 50).retrieve
    assert CostGate(enabled=False).decide(10, 1000, 1000).retrieve


def test_windows_fit_the_budget_and_cover_every_line() -> None:
    lines = tree_lines("docs-functions.txt")
    windows = split_windows(lines, list(range(len(lines))), budget_tokens=3000)
    assert len(windows) > 5
    assert [i for w in windows for i in w] == list(range(len(lines)))
    for window in windows:
        numbered = "".join(f"{i + 1}|{lines[i]}\n" for i in window)
        assert count_tokens(numbered) <= 3000


# The registry: what --filter NAME resolves to.


class _KeepFirst:
    """A filter of the tests' own: the first line only."""

    name = "keep-first"

    async def apply(self, observation: FilterInput) -> FilterResult:
        text = observation.lines[0] if observation.lines else ""
        return FilterResult(name=self.name, text=text, kept_lines=[1] if text else [],
                            tokens_full=count_tokens(observation.text),
                            tokens_shown=count_tokens(text))


@pytest.fixture
def keep_first() -> Iterator[str]:
    register_filter("keep-first", lambda context: _KeepFirst())
    try:
        yield "keep-first"
    finally:
        unregister_filter("keep-first")


async def test_a_registered_filter_is_built_fresh_per_episode(keep_first: str) -> None:
    assert keep_first in filter_names() and check_filter_name(keep_first) == keep_first
    make = filter_maker(FilterContext(FilterSettings(name=keep_first)))
    first, second = make(), make()
    assert first is not second and first.name == "keep-first"
    result = await first.apply(FilterInput(goal="g", lines=["[1] RootWebArea 'x'", "[2] b"]))
    assert result.text == "[1] RootWebArea 'x'" and result.kept_lines == [1]


def test_register_filter_works_as_a_decorator_and_refuses_a_taken_name() -> None:
    @register_filter("keep-first-decorated", needs_retriever=True)
    def make(context: FilterContext) -> _KeepFirst:
        return _KeepFirst()

    try:
        assert get_filter("keep-first-decorated").needs_retriever
        register_filter("keep-first-decorated", make)  # the same factory again: harmless
        with pytest.raises(ValueError, match="already registered"):
            register_filter("keep-first-decorated", lambda context: _KeepFirst())
        with pytest.raises(ConfigError, match="needs a retriever"):
            filter_maker(FilterContext(FilterSettings(name="keep-first-decorated")))
    finally:
        unregister_filter("keep-first-decorated")


def test_an_unknown_filter_lists_the_available_names() -> None:
    with pytest.raises(ConfigError) as caught:
        get_filter("no-such-filter")
    message = str(caught.value)
    assert "no-such-filter" in message
    for name in filter_names():
        assert name in message
    assert "focus-outline" not in message and "linewise filters --all" in message


def test_research_variants_are_accepted_but_not_listed() -> None:
    public = filter_names()
    assert public[:8] == ["auto", "none", "truncate", "focus", "lines", "lines+structure", "bm25",
                          "embedding"]
    every = filter_names(include_hidden=True)
    hidden = [name for name in every if name not in public]
    assert {"focus-outline", "focus-outline-zoom", "focus-candidates", "focus-choose",
            "focus-expand-units"} <= set(hidden)
    assert all(get_filter(name).hidden and get_filter(name).description for name in hidden)
    assert all(not get_filter(name).hidden and get_filter(name).description
               for name in public)
    assert check_filter_name("focus-outline") == "focus-outline"
    made = filter_maker(FilterContext(FilterSettings(name="focus-candidates")))()
    assert made.name == "focus-candidates"


def test_a_filter_registers_hidden_or_public_with_its_description() -> None:
    register_filter("keep-first-research", lambda context: _KeepFirst(), hidden=True,
                    description="research only")
    register_filter("keep-first-public", lambda context: _KeepFirst(),
                    description="the first line")
    try:
        assert "keep-first-research" not in filter_names()
        assert "keep-first-research" in filter_names(include_hidden=True)
        assert filter_names()[-1] == "keep-first-public"
        assert get_filter("keep-first-public").description == "the first line"
        assert filter_maker(FilterContext(FilterSettings(name="keep-first-research")))()
    finally:
        unregister_filter("keep-first-research")
        unregister_filter("keep-first-public")


def test_the_built_in_filters_declare_what_they_need() -> None:
    needs = {name: get_filter(name).needs_retriever for name in
             ("none", "truncate", "embedding", "lines", "lines+structure")}
    assert needs == {"none": False, "truncate": False, "embedding": False, "lines": True,
                     "lines+structure": True}
    truncate = filter_maker(FilterContext(FilterSettings(name="truncate", max_obs_tokens=7)))()
    assert isinstance(truncate, TruncateFilter) and truncate.name == "truncate"


async def test_a_view_that_keeps_every_line_cuts_no_tokens() -> None:
    """bm25 keeps every line of a small MiniWoB++ page; its structure-preserving view
    shows them without ``url=`` and ``focused``, which is how it renders, not a cut."""
    lines = (TREES / "miniwob-login-user.txt").read_text(encoding="utf-8").splitlines()
    observation = FilterInput(goal="Enter the username and the password and press login",
                              lines=lines)
    result = await get_filter("bm25").bind(FilterContext())().apply(observation)
    assert len(result.kept_lines) == len(lines)
    assert result.tokens_shown < result.tokens_full  # the state went
    assert result.reduction == 0.0
    assert result.record(len(lines)).tokens_full_view == observation.stateless_tokens
    # a view that leaves lines out is measured against the same rendering
    kept = rebuild_with_structure(LineTree(lines), range(3)).text
    cut = FilterResult(name="x", text=kept, tokens_full=observation.full_tokens,
                       tokens_shown=count_tokens(kept),
                       tokens_full_view=observation.stateless_tokens)
    assert cut.reduction == pytest.approx(1 - count_tokens(kept) / observation.stateless_tokens)
