"""Item expansion, the outline-first filter and the context-embedding units, on real
captured trees (tests/data/trees and the pages of tasks/filter-cases), with scripted
retriever models."""

from __future__ import annotations

import json
import re
from typing import Any

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.focus import FocusConfig, FocusFilter
from linewise.agent.filters.focus_outline import OutlineFirstFilter, entry_label
from linewise.agent.filters.registry import FilterContext, get_filter
from linewise.agent.filters.stages.context_embedding import UnitIndex, page_units, unit_groups
from linewise.agent.filters.view.items import enclosing_item, expand_items, section_of
from linewise.agent.filters.view.structure import rebuild_with_structure
from linewise.agent.filters.view.tree import LineTree
from linewise.apps.filter_eval import FilterCase, load_cases
from linewise.testing import CallInfo, FunctionModel
from linewise.tokens import count_message_tokens, count_tokens
from tests.support.paths import REPO
from tests.support.trees import WordHashEmbedder, line_of, tree_lines

CASES = REPO / "tasks" / "filter-cases"


def case(name: str) -> FilterCase:
    (loaded,) = load_cases(CASES / f"{name}.json")
    return loaded


def answer(*numbers: int) -> str:
    return json.dumps({"think": "these", "ranges": [[n, n] for n in numbers]})


def picking(pattern: str) -> Any:
    """A retriever that answers the first shown line matching ``pattern``."""

    def pick(messages: list[dict[str, Any]], info: CallInfo) -> str:
        found = re.search(rf"^(\d+)\|[^\n]*{pattern}", messages[-1]["content"], re.M)
        assert found is not None, f"no shown line matches {pattern!r}"
        return answer(int(found.group(1)))

    return pick


# -- items


def test_a_product_title_brings_its_article_with_the_add_to_cart_button() -> None:
    lines = case("large.built.shop.1").lines
    tree = LineTree(lines)
    title = line_of(lines, r"heading 'Cast Iron Skillet 12 inch'")
    item = enclosing_item(tree, title)
    assert lines[item[0]].strip().startswith("[83] article")
    assert line_of(lines, r"\[90\] button 'Add to cart'") in item
    assert not any("Nonstick Frying Pan" in lines[i] for i in item)  # the next product stays out


def test_a_row_cell_brings_its_edit_link_and_a_description_brings_its_term() -> None:
    table = case("large.built.table.1").lines
    item = enclosing_item(LineTree(table), line_of(table, r"cell 'Sofia Rossi'"))
    assert line_of(table, r"\[150\] link 'Edit'") in item
    assert table[item[0]].strip().endswith("row ''")
    docs = tree_lines("docs-json.txt")
    tree = LineTree(docs)
    term = line_of(docs, r"term 'json\.loads\(")
    description = line_of(docs[term:], r"Deserialize") + term
    item = enclosing_item(tree, description)
    assert term in item and description in item
    # a long definition keeps its term and the line, not the whole definition
    assert len(item) <= 40 < section_of(tree, term).stop - section_of(tree, term).start


def test_expansion_stays_within_the_view_budget_on_a_7700_line_page() -> None:
    lines = tree_lines("docs-functions.txt")
    tree = LineTree(lines)
    seeds = [i for i, line in enumerate(lines) if " term '" in line]
    for budget in (1500, 4000):
        expansion = expand_items(tree, set(), seeds, budget)
        view = rebuild_with_structure(tree, expansion.lines).text
        assert count_tokens(view) == expansion.view_tokens <= budget
        assert expansion.items_added and expansion.items_skipped
    # the first seeds get their items, whole or capped, before later ones
    expansion = expand_items(tree, set(), seeds, 4000)
    assert set(enclosing_item(tree, seeds[0])) <= expansion.lines


async def test_focus_items_keeps_the_button_under_the_product_the_model_recognised() -> None:
    shop = case("large.built.shop.1")
    observation = FilterInput(goal=shop.goal, lines=shop.lines)
    plain = await FocusFilter(FunctionModel(picking("heading 'Cast Iron")),
                              FocusConfig(keep_top_lexical=0)).apply(observation)
    items = await FocusFilter(FunctionModel(picking("heading 'Cast Iron")),
                              FocusConfig(keep_top_lexical=0, items=True)).apply(observation)
    assert "90" not in plain.shown_bids  # the model kept the title, not the button
    assert "90" in items.shown_bids
    notes = items.notes["items"]
    assert isinstance(notes, dict) and notes["view_tokens"] <= notes["view_budget_tokens"]
    assert items.reduction > 0.7


# -- outline first, then zoom in


async def test_outline_first_input_is_bounded_on_large_pages() -> None:
    for lines in (tree_lines("docs-functions.txt"), case("large.python3-doc.datetime.1").lines):
        for budget in (2000, 4000):
            model = FunctionModel(picking("heading"))
            result = await OutlineFirstFilter(
                model, FocusConfig(budget_tokens=budget), zoom="model"
            ).apply(FilterInput(goal="Which function compares two dates?", lines=lines))
            assert len(model.requests) == 2
            sizes = [count_message_tokens(r.messages) for r in model.requests]
            assert all(size <= budget for size in sizes)
            assert result.notes["retriever_input_tokens"] == sizes
            outline = model.requests[0].messages[-1]["content"]
            assert "StaticText" not in outline and "omitted" in outline
            assert result.reduction > 0.9


async def test_outline_first_keeps_the_button_of_the_item_chosen_from_the_outline() -> None:
    shop = case("large.built.shop.1")
    tree = LineTree(shop.lines)
    article = line_of(shop.lines, r"\[83\] article")
    assert "Cast Iron Skillet" in entry_label(tree, article)  # an unnamed item is summarised
    model = FunctionModel(picking(r"\[83\] article"))
    result = await OutlineFirstFilter(model, zoom="candidates").apply(
        FilterInput(goal="Buy the heavy pan for searing.", lines=shop.lines)
    )
    assert len(model.requests) == 1
    assert result.notes["outline_choice"] == [article + 1]
    assert "90" in result.shown_bids and result.reduction > 0.7


async def test_outline_first_falls_back_to_the_candidates_and_escalates_when_stuck() -> None:
    lines = tree_lines("docs-json.txt")
    model = FunctionModel.answering(["nothing", "still nothing"])
    outline_first = OutlineFirstFilter(model)
    first = await outline_first.apply(FilterInput(goal="json.dumps", lines=lines))
    assert "no usable ranges" in str(first.notes["candidates_fallback"])
    assert first.reduction > 0.5 and first.shown_bids
    # stuck on that view: the unchanged page is not served the same selection, and the
    # larger view needs no model call
    stuck = await outline_first.apply(FilterInput(goal="json.dumps", lines=lines,
                                                  history=["noop()"]))
    assert stuck.notes["escalation"]["level"] == 1  # type: ignore[index]
    assert set(stuck.kept_lines) != set(first.kept_lines)
    assert len(stuck.kept_lines) > len(first.kept_lines)
    assert len(model.requests) == 2


def test_new_filters_are_registered() -> None:
    retriever = FunctionModel(picking("heading"))
    for name in ("focus-items", "focus-outline", "focus-outline-zoom"):
        assert get_filter(name).needs_retriever
        made = get_filter(name).bind(FilterContext(retriever=retriever))()
        assert made.name == name
    for name in ("focus-candidates-items", "focus-candidates-units"):
        assert not get_filter(name).needs_retriever
    outline = get_filter("focus-outline").bind(FilterContext(retriever=retriever))()
    assert isinstance(outline, OutlineFirstFilter) and outline.zoom == "candidates"


# -- embedding units with their context


async def test_units_carry_their_term_and_bring_it_as_a_candidate() -> None:
    lines = tree_lines("docs-json.txt")
    tree = LineTree(lines)
    units = page_units(tree)
    term = line_of(lines, r"term 'json\.loads\(")
    (loads,) = [u for u in units if u.index == term]
    assert "Deserialize" in loads.text  # the term's unit holds its definition's words
    described = [u for u in units if u.anchor != u.index]
    assert described and all(" term '" in lines[u.anchor] or "heading" in lines[u.anchor]
                             or "row" in lines[u.anchor] or "article" in lines[u.anchor]
                             or "listitem" in lines[u.anchor] for u in described)
    embedder = WordHashEmbedder()
    index = UnitIndex(embedder)
    goal = loads.text.split("—")[-1]  # the words of the definition, not the term's name
    groups = await unit_groups(index, tree, FilterInput(goal=goal, lines=lines), top_k=3)
    assert groups and term in groups[0].lines
    vectors = index._vectors
    await unit_groups(index, tree, FilterInput(goal="other", lines=lines))
    assert index._vectors is vectors  # the same page is embedded once


def test_every_control_of_a_form_is_a_unit_of_its_own() -> None:
    """A form is one item, and its unit proposes the form's line and the lines around
    it: a field further down must be a unit itself, or no query can reach it."""
    lines = tree_lines("page-form.txt")
    tree = LineTree(lines)
    units = {u.index: u for u in page_units(tree)}
    for control in (r"textbox 'Bio'", r"combobox 'Color'"):
        index = line_of(lines, control)
        assert index in units, control
        assert control.split("'")[1] in units[index].text


# -- escalation with a real action agent driven by a scripted model


async def test_an_action_model_stuck_on_a_filtered_view_recovers_once_shown_more() -> None:
    """The action model (the real ActionAgent with a scripted chat model) answers noop
    while the search box is not in its view; the next step on the unchanged page shows
    more without a retriever call, and the agent acts."""
    from linewise.agent.policy import ActionAgent
    from linewise.agent.prompt import PageView

    def action_model(messages: list[dict[str, Any]], info: CallInfo) -> str:
        if "[202] textbox 'Quick search'" in messages[-1]["content"]:
            return "<think>the search box</think><action>fill('202', 'decimal')</action>"
        return "<think>I cannot find a search box.</think><action>noop()</action>"

    lines = tree_lines("docs-json.txt")
    goal = "Look up the decimal module in the documentation."
    retriever = FunctionModel(picking("heading"))
    focus = FocusFilter(retriever, FocusConfig(keep_top_lexical=0, items=True))
    agent = ActionAgent(FunctionModel(action_model))
    history: list[str] = []
    thoughts: list[str] = []
    views = []
    for _ in range(3):
        view = await focus.apply(FilterInput(goal=goal, lines=lines, history=list(history),
                                             thoughts=list(thoughts)))
        views.append(view)
        decision = await agent.decide(goal, PageView(url="file:///json.html", text=view.text))
        agent.remember(decision, None)
        assert decision.action_text is not None
        history.append(decision.action_text)
        thoughts.append(decision.think or "")
        if "fill" in decision.action_text:
            break
    assert len(views) == 2 and history == ["noop()", "fill('202', 'decimal')"]
    escalation = views[1].notes["escalation"]
    assert isinstance(escalation, dict) and escalation["level"] == 1
    assert set(escalation["reasons"]) == {"noop", "cannot_find"} and escalation["page_unchanged"]
    assert views[1].kept_lines != views[0].kept_lines  # not the same selection again
    assert len(retriever.requests) == 1


async def test_a_changed_page_embeds_only_its_new_units() -> None:
    lines = tree_lines("docs-json.txt")
    embedder = WordHashEmbedder()
    seen: list[int] = []
    original = embedder.embed

    async def counting(texts: list[str]) -> Any:
        seen.append(len(texts))
        return await original(texts)

    embedder.embed = counting  # type: ignore[method-assign]
    index = UnitIndex(embedder)
    await index.units(LineTree(lines))
    changed = list(lines)
    at = line_of(lines, r"term 'json\.loads\(") + 1
    changed.insert(at, changed[at].replace("StaticText '", "StaticText 'changed "))
    await index.units(LineTree(changed))
    assert seen[0] > 50 and seen[1] == 1
