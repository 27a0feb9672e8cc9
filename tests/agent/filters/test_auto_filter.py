"""``auto``, the default: a tree that fits the action model's view budget is shown whole,
a larger one goes through ``focus`` down to that budget, with the retriever's stages only
when the run has a retriever."""

from __future__ import annotations

import json
from typing import Any

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.registry import FilterContext, filter_maker
from linewise.agent.history import PastStep
from linewise.apps.filter_eval import load_cases
from linewise.settings import FilterSettings, LinewiseSettings
from linewise.testing import CallInfo, FunctionModel
from tests.support.paths import REPO
from tests.support.trees import WordHashEmbedder

CASE = "large.python3-doc.json.2"


def expansion(messages: list[dict[str, Any]], info: CallInfo) -> str:
    return json.dumps({"terms": ["serialize", "string"]})


def observation(case_id: str = CASE) -> FilterInput:
    [case] = [c for c in load_cases(REPO / "tasks" / "filter-cases") if c.id == case_id]
    return FilterInput(goal=case.goal, lines=case.lines, history=case.history)


async def test_a_tree_within_the_view_budget_is_shown_whole() -> None:
    page = observation()
    made = filter_maker(FilterContext(FilterSettings(), embedder=WordHashEmbedder,
                                      view_budget_tokens=page.full_tokens + 1))()
    result = await made.apply(page)
    assert made.name == "auto" and result.text == page.text
    assert result.notes.get("small_page") is True and result.calls == []


async def test_a_larger_tree_is_cut_to_the_view_budget_without_a_retriever() -> None:
    page = observation()
    assert page.full_tokens > 10_000
    result = await filter_maker(FilterContext(FilterSettings(), embedder=WordHashEmbedder,
                                              view_budget_tokens=2000))().apply(page)
    assert result.tokens_shown <= 2000 * 1.15 and result.calls == []
    assert "expansion" not in result.notes["stages_run"]
    assert "units" in result.notes["stages_run"]


async def test_with_a_retriever_the_query_is_expanded() -> None:
    page = observation()
    model = FunctionModel(expansion)
    result = await filter_maker(FilterContext(FilterSettings(), model, embedder=WordHashEmbedder,
                                              view_budget_tokens=2000))().apply(page)
    assert "expansion" in result.notes["stages_run"] and len(model.requests) == 1
    assert result.tokens_shown < page.full_tokens / 4


def test_the_view_budget_is_sized_to_the_action_model() -> None:
    settings = LinewiseSettings()
    assert settings.filter.name == "auto"
    assert settings.view_budget_tokens(local=True) < settings.view_budget_tokens(local=False)
    small = LinewiseSettings(local={"ctx_size": 4096})
    assert small.view_budget_tokens(local=True) <= 2048
    assert LinewiseSettings(agent={"view_budget_tokens": 1200}).view_budget_tokens(
        local=False) == 1200


async def test_a_stuck_agent_is_shown_more_but_never_the_whole_tree() -> None:
    page = observation()
    made = filter_maker(FilterContext(FilterSettings(), embedder=WordHashEmbedder,
                                      view_budget_tokens=1500))()
    shown = []
    for history in ([], ["noop()"], ["noop()", "noop()"], ["noop()"] * 3):
        past = [PastStep.of_text(a) for a in history]
        result = await made.apply(page.model_copy(update={"history": past}))
        shown.append((result.notes["escalation"]["level"], result.tokens_shown))
    levels = [level for level, _ in shown]
    assert levels == [0, 1, 2, 2]
    tokens = [n for _, n in shown]
    assert tokens[0] < tokens[1] < tokens[2]
    assert tokens[1] <= 2 * 1500 * 1.15 and max(tokens[2:]) <= 4 * 1500 * 1.15
    assert tokens[2] < page.full_tokens / 2
