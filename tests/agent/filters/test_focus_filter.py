"""The bm25 filter, the candidate stages, the focus filter's budget, and escalation when
the agent is stuck: on real captured trees, with scripted retriever models."""

from __future__ import annotations

import re
from typing import Any

import pytest

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.agent.filters.bm25 import BM25Filter
from linewise.agent.filters.focus import FocusConfig, FocusFilter
from linewise.agent.filters.registry import FilterContext, get_filter
from linewise.agent.filters.retriever.escalation import ShownStep, stuck_reasons
from linewise.agent.filters.stages.budget import fill_budget, numbered_sizes
from linewise.agent.filters.stages.candidates import (
    changed_groups,
    embedding_groups,
    guard_groups,
    lexical_groups,
    outline_groups,
)
from linewise.agent.filters.view.structure import shown_line
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.bm25 import LineRanker, words
from linewise.apps.filter_eval import (
    GOAL_KINDS,
    evaluate,
    load_cases,
    summarize_kinds,
)
from linewise.axtree import bids_in
from linewise.settings import FilterSettings
from linewise.testing import CallInfo, FunctionModel
from linewise.tokens import count_message_tokens
from tests.support.paths import REPO
from tests.support.trees import WordHashEmbedder, line_of, tree_lines

CASES = REPO / "tasks" / "filter-cases"


def first_shown_line(messages: list[dict[str, Any]], info: CallInfo) -> str:
    """A retriever that keeps only the first line it is shown."""
    first = re.search(r"^(\d+)\|", messages[-1]["content"], re.M)
    assert first is not None
    return f'{{"think": "the top", "ranges": [[{first.group(1)}, {first.group(1)}]]}}'


# -- bm25


def test_words_split_names_and_drop_stop_words() -> None:
    assert words("Open the docs of json.dumps() for searching lists") == [
        "docs", "json", "dump", "search", "list"]


async def test_bm25_keeps_a_named_element_with_its_context() -> None:
    lines = tree_lines("docs-json.txt")
    result = await BM25Filter().apply(FilterInput(goal="Show me json.loads", lines=lines))
    assert "1206" in bids_in(result.text)  # [1206] term 'json.loads(s, *, cls=None, …'
    assert result.reduction > 0.9 and result.fallback_reason is None
    assert result.notes["hits"] and result.latency_ms < 5000
    ranked = LineRanker(lines).top("raw_decode", 5)
    assert "raw_decode" in lines[ranked[0][0]]
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)


async def test_bm25_shows_the_whole_tree_when_nothing_matches() -> None:
    lines = tree_lines("miniwob-email-inbox.txt")
    result = await BM25Filter().apply(FilterInput(goal="zzzz qqqq", lines=lines))
    assert result.reduction == 0 and result.fallback_reason


# -- candidate stages


def test_lexical_stage_finds_the_named_term_with_context() -> None:
    lines = tree_lines("docs-json.txt")
    goal = "What does raw_decode return?"
    groups = lexical_groups(lines, FilterInput(goal=goal, lines=lines), context=2)
    term = line_of(lines, r"term 'raw_decode\(")
    assert any(term in g.lines for g in groups[:5])
    assert all(len(g.lines) <= 5 and g.stage == "lexical" for g in groups)


def test_outline_stage_proposes_search_box_headings_and_terms() -> None:
    lines = tree_lines("docs-json.txt")
    groups = outline_groups(lines)
    proposed = [i for g in groups for i in g.lines]
    # the search landmark and its box come first
    assert line_of(lines, r"textbox 'Quick search'") in proposed[:2]
    for pattern in (r"heading 'Basic Usage'", r"term 'json\.loads\(", r"columnheader 'JSON'"):
        assert line_of(lines, pattern) in proposed
    assert not any(re.search(r"StaticText|paragraph", lines[i]) for i in proposed)


def test_guard_stage_keeps_the_focused_element_and_named_bids() -> None:
    lines = tree_lines("docs-json.txt")
    observation = FilterInput(goal="g", lines=lines, focused_bid="202", must_keep_bids=["948"])
    (group,) = guard_groups(LineTree(lines), observation)
    assert line_of(lines, r"\[202\] textbox") in group.lines
    assert line_of(lines, r"\[948\] term") in group.lines


def test_changed_stage_proposes_what_changed_and_nothing_on_a_new_page() -> None:
    before = tree_lines("miniwob-email-inbox.txt")
    after = list(before)
    after[30:30] = ["\t\t[999] alert 'Message sent'", "\t\t\tStaticText 'Message sent'"]
    (group,) = changed_groups(before, after)
    assert group.lines == (30, 31) and group.stage == "changed"
    assert changed_groups(before, before) == [] and changed_groups(None, after) == []
    assert changed_groups(tree_lines("miniwob-social-media.txt"), after) == []


async def test_embedding_stage_brings_the_term_a_description_belongs_to() -> None:
    lines = tree_lines("docs-json.txt")
    goal = "Serialize obj to a JSON formatted str using this conversion table"
    tree = LineTree(lines)
    groups = await embedding_groups(WordHashEmbedder(), tree, FilterInput(goal=goal, lines=lines))
    assert groups and all(g.stage == "embedding" for g in groups)
    terms = {i for g in groups for i in g.lines if " term '" in lines[i]}
    described = {i for g in groups for i in g.lines if "StaticText" in lines[i]}
    # every description line chosen comes with the term it belongs to, when it has one
    for index in described:
        owner = next((a for a in tree.ancestors(index) if " term '" in lines[a]), None)
        assert owner is None or owner in terms


def test_fill_budget_takes_stages_in_turns_within_the_budget() -> None:
    lines = tree_lines("docs-functions.txt")
    observation = FilterInput(goal="zip", lines=lines, focused_bid="342")
    tree = LineTree(lines)
    groups = {"guard": guard_groups(tree, observation),
              "lexical": lexical_groups(lines, observation), "outline": outline_groups(lines)}
    sizes = numbered_sizes(lines, (i for gs in groups.values() for g in gs for i in g.lines))
    taken = fill_budget(groups, sizes, 1500)
    assert taken.tokens <= 1500 + sum(sizes[i] for g in groups["guard"] for i in g.lines)
    assert set(taken.by_stage) == {"guard", "lexical", "outline"}
    assert taken.top_lexical and set(taken.top_lexical) <= taken.lines


# -- focus: the budget holds on any page


async def test_focus_input_stays_within_the_budget_on_a_7700_line_page() -> None:
    lines = tree_lines("docs-functions.txt")
    assert len(lines) > 7000
    for budget in (2000, 4000):
        model = FunctionModel(first_shown_line)
        focus = FocusFilter(model, FocusConfig(budget_tokens=budget))
        result = await focus.apply(FilterInput(
            goal="Which built-in turns an iterable into pairs with their position?", lines=lines,
        ))
        (request,) = model.requests
        assert count_message_tokens(request.messages) <= budget
        assert result.notes["retriever_input_tokens"] == count_message_tokens(request.messages)
        stages = result.notes["stages"]
        assert isinstance(stages, dict) and {"lexical", "outline"} <= set(stages)
        assert "omitted" in request.messages[-1]["content"]
        assert result.reduction > 0.9 and result.notes["model_lines"]


async def test_focus_falls_back_to_the_candidates_on_an_unusable_answer() -> None:
    lines = tree_lines("docs-json.txt")
    model = FunctionModel.answering(["no idea", "still no idea"])
    result = await FocusFilter(model).apply(FilterInput(goal="json.loads", lines=lines))
    assert len(model.requests) == 2
    assert "no usable ranges" in str(result.notes["candidates_fallback"])
    assert result.fallback_reason is None and result.reduction > 0.5
    stages = result.notes["stages"]
    assert isinstance(stages, dict)
    assert set(result.kept_lines) >= {n for ns in stages.values() for n in ns}


async def test_focus_shows_small_pages_whole_without_a_call() -> None:
    model = FunctionModel(first_shown_line)
    lines = tree_lines("miniwob-social-media.txt")
    result = await FocusFilter(model).apply(FilterInput(goal="reply", lines=lines))
    assert not model.requests and result.reduction == 0 and result.notes["small_page"]


# -- escalation


def scripted_agent(view: FilterResult) -> str:
    """An action model that searches the docs when it sees the search box, else waits."""
    if "202" in view.shown_bids:
        return "fill('202', 'decimal')"
    return "noop()"


async def test_a_noop_on_a_filtered_view_is_followed_by_more_and_the_agent_recovers() -> None:
    lines = tree_lines("docs-json.txt")
    goal = "Look up the decimal module in the documentation."
    model = FunctionModel(first_shown_line)
    focus = FocusFilter(model, FocusConfig(keep_top_lexical=0))
    history: list[str] = []
    views = []
    for _ in range(3):
        view = await focus.apply(FilterInput(goal=goal, lines=lines, history=list(history)))
        views.append(view)
        action = scripted_agent(view)
        history.append(action)
        if action != "noop()":
            break
    first, second = views[0], views[1]
    assert "202" not in first.shown_bids  # the first view lost the search box
    escalation = second.notes["escalation"]
    assert isinstance(escalation, dict)
    assert escalation["level"] == 1 and escalation["reasons"] == ["noop"]
    assert escalation["page_unchanged"] is True
    # the same, unchanged page was not served the same selection: it shows more
    assert set(second.kept_lines) > set(first.kept_lines)
    assert len(model.requests) == 1  # the larger view needs no model call
    assert history[-1] == "fill('202', 'decimal')" and len(views) == 2


async def test_staying_stuck_escalates_to_the_whole_tree_then_back() -> None:
    lines = tree_lines("docs-json.txt")
    focus = FocusFilter(FunctionModel(first_shown_line), FocusConfig(keep_top_lexical=0))
    goal = "Open the section on something absent"
    await focus.apply(FilterInput(goal=goal, lines=lines))
    larger = await focus.apply(FilterInput(goal=goal, lines=lines, history=["noop()"]))
    whole = await focus.apply(FilterInput(
        goal=goal, lines=lines, history=["noop()", "noop()"],
        thoughts=["", "I cannot find the section anywhere."],
    ))
    assert larger.notes["escalation"]["level"] == 1  # type: ignore[index]
    assert whole.notes["escalation"]["level"] == 2  # type: ignore[index]
    assert whole.reduction == 0 and len(whole.kept_lines) == len(lines)
    calm = await focus.apply(FilterInput(
        goal=goal, lines=lines, history=["noop()", "noop()", "click('212')"],
    ))
    assert calm.notes["escalation"]["level"] == 0 and calm.reduction > 0.5  # type: ignore[index]


async def test_an_unchanged_page_without_trouble_reuses_the_selection() -> None:
    lines = tree_lines("docs-json.txt")
    model = FunctionModel(first_shown_line)
    focus = FocusFilter(model)
    first = await focus.apply(FilterInput(goal="json.loads", lines=lines))
    shown = first.shown_bids[-1]
    again = await focus.apply(FilterInput(
        goal="json.loads", lines=lines, history=[f"click('{shown}')"]
    ))
    assert len(model.requests) == 1 and again.kept_lines == first.kept_lines
    assert "reused" in str(again.notes["incremental"])


def test_stuck_reasons() -> None:
    lines = tree_lines("miniwob-email-inbox.txt")
    shown = ShownStep(lines, {"20", "28"})

    def reasons(**fields: Any) -> list[str]:
        return stuck_reasons(FilterInput(goal="g", lines=lines, **fields), shown)

    assert reasons(history=["click('20')"]) == []
    assert reasons(history=["click('38')"]) == ["filter_miss"]
    assert reasons(history=["click('20')", "click('20')"]) == ["repeat"]
    assert reasons(history=["click('28')"], last_action_error="element 28 is not visible") == [
        "action_error"]
    assert reasons(history=["scroll(0, 100)"], thoughts=["I can't find the star icon"]) == [
        "cannot_find"]
    assert stuck_reasons(FilterInput(goal="g", lines=lines, history=["noop()"]), None) == []


# -- registration and the shipped cases


def test_bm25_and_focus_are_registered() -> None:
    assert not get_filter("bm25").needs_retriever
    assert get_filter("focus").needs_retriever
    choose = FilterSettings(name="focus", focus_preset="choose")
    made = get_filter("focus").bind(
        FilterContext(choose, retriever=FunctionModel(first_shown_line)))()
    assert isinstance(made, FocusFilter) and made.embedder is None and made.model is not None
    candidates = get_filter("focus-candidates").bind(FilterContext())()
    assert isinstance(candidates, FocusFilter) and candidates.model is None
    assert candidates.name == "focus-candidates"


@pytest.mark.slow
async def test_shipped_large_cases_cover_goal_kinds_and_page_kinds() -> None:
    # the held-out cases stay out: no filter is run on them here
    cases = [c for c in load_cases(CASES) if len(c.lines) > 300 and c.id.startswith("large.")]
    assert len(cases) >= 40
    assert len({c.source.split(":")[-1].split("/")[0] if c.source.startswith("built")
                else c.source.split(":")[0] for c in cases}) >= 5
    kinds = summarize_kinds("bm25", await evaluate(cases, BM25Filter))
    assert [k.kind for k in kinds] == list(GOAL_KINDS)
    assert all(k.cases >= 10 for k in kinds)
    named = next(k for k in kinds if k.kind == "named")
    paraphrased = next(k for k in kinds if k.kind == "paraphrased")
    assert named.gold_recall > paraphrased.gold_recall  # lexical matching needs the name


async def test_a_view_reads_the_same_after_focus_moves_and_the_fragment_changes() -> None:
    # a click on an in-page link focused the document and changed its URL's fragment: the
    # view used to change from its first line on, and the embedded model's prompt cache
    # with it (50 s to read again a page it had read the step before)
    lines = tree_lines("docs-json.txt")
    url = "url='file:///usr/share/doc/python3.11/html/library/json.html"
    before = [lines[0].replace(", focused", ""), *lines[1:]]
    after = [lines[0].replace(url, url.removesuffix("'") + "#json.load"), *lines[1:]]
    assert "focused" in after[0] and "#json.load" in after[0]
    focus = get_filter("focus").bind(FilterContext(FilterSettings(
        name="focus", focus_preset="shared-items")))()
    goal = "Which function of json reads a document from a file?"
    first = await focus.apply(FilterInput(goal=goal, lines=before))
    second = await focus.apply(FilterInput(goal=goal, lines=after))
    assert second.text == first.text and "focused" not in first.text


def test_a_short_line_reads_the_same_as_context_and_as_kept() -> None:
    tree = LineTree(["RootWebArea 'Docs'", "\t[282] generic, clickable", "\t\tStaticText 'x'",
                     "\t[283] paragraph ''", f"\t[284] link '{'a long name ' * 6}'"])
    for index in (1, 3):
        assert shown_line(tree, index, context=True) == shown_line(tree, index, context=False)
    assert shown_line(tree, 4, context=True) == tree.short_head(4)  # a long one is shortened
