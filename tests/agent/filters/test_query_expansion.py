"""Query expansion: the retriever model names the words a paraphrased element shows,
on a real captured tree, with scripted models."""

from __future__ import annotations

import json
from typing import Any

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.focus import FocusConfig, FocusFilter
from linewise.agent.filters.stages.query_expansion import QueryExpander, parse_terms
from linewise.agent.history import PastStep
from linewise.errors import LLMError
from linewise.testing import CallInfo, FunctionModel
from linewise.tokens import count_message_tokens
from tests.support.paths import TREES

GOAL = "Which routine turns a Python object into a string of text? Show its entry."
GOLD = "[948] term 'json.dumps("


def json_tree() -> list[str]:
    return (TREES / "docs-json.txt").read_text().split("\n")


def shown(result_text: str) -> bool:
    return GOLD in result_text


def terms_model(terms: list[str]) -> FunctionModel:
    def answer(messages: list[dict[str, Any]], info: CallInfo) -> str:
        return json.dumps({"terms": terms})
    return FunctionModel(answer)


def test_parse_terms_reads_the_object_a_list_or_loose_lines() -> None:
    assert parse_terms('{"terms": ["City", "town", "city", ""]}', 12) == ["City", "town"]
    assert parse_terms('```json\n["IBAN", "account number"]\n```', 12) == [
        "IBAN", "account number"]
    assert parse_terms("- Subscribe\n- Watch thread, notify", 2) == ["Subscribe", "Watch thread"]
    assert parse_terms("the the", 12) == []  # nothing but stop words


async def test_expanded_terms_bring_a_paraphrased_entry_into_the_view() -> None:
    lines = json_tree()
    observation = FilterInput(goal=GOAL, lines=lines)
    plain = await FocusFilter(None, FocusConfig.from_preset("candidates-items")).apply(
        observation)
    assert not shown(plain.text), "the goal's own words should not find json.dumps"

    model = terms_model(["json.dumps", "serialize", "encode"])
    expanding = FocusFilter(None, FocusConfig.from_preset("expand-items"),
                            expander=QueryExpander(model))
    result = await expanding.apply(FilterInput(goal=GOAL, lines=lines))
    assert shown(result.text)
    assert result.tokens_shown < 0.3 * result.tokens_full
    assert result.notes["expansion"]["terms"] == ["json.dumps", "serialize", "encode"]
    [call] = result.calls
    assert call.purpose == "retriever"
    # the model reads the goal and the page title, never the page: its input is small
    prompt = model.requests[0].messages
    assert GOAL in prompt[-1]["content"] and "json" in prompt[-1]["content"]
    assert "[948]" not in prompt[-1]["content"]
    assert count_message_tokens(prompt) < 600


async def test_the_history_names_its_elements_and_an_unchanged_query_is_not_asked_again(
) -> None:
    lines = json_tree()
    model = terms_model(["dumps"])
    expander = QueryExpander(model)
    step = FilterInput(goal=GOAL, lines=lines, history=["click('948')"])
    first = await expander.expand(step)
    again = await expander.expand(step)
    assert first.terms == again.terms == ["dumps"] and again.reused
    assert len(model.requests) == 1
    assert "click('948')  (term 'json.dumps(obj" in model.requests[0].messages[-1]["content"]
    past = [PastStep.of_text("click('948')"), PastStep.of_text("noop()")]
    await expander.expand(step.model_copy(update={"history": past}))
    assert len(model.requests) == 2


async def test_a_failing_expansion_leaves_the_other_stages_working() -> None:
    def broken(messages: list[dict[str, Any]], info: CallInfo) -> str:
        raise LLMError("endpoint down")

    lines = json_tree()
    flt = FocusFilter(None, FocusConfig.from_preset("expand-items"),
                      expander=QueryExpander(FunctionModel(broken)))
    result = await flt.apply(FilterInput(goal="Find json.loads.", lines=lines))
    assert "json.loads(" in result.text
    assert "endpoint down" in result.notes["expansion"]["error"]
    assert result.calls and result.calls[0].error


async def test_a_little_changed_page_reuses_the_expanded_view_without_a_call() -> None:
    from linewise.agent.filters.registry import FilterContext, get_filter

    lines = json_tree()
    model = terms_model(["json.dumps"])
    flt = get_filter("focus-expand-items").bind(FilterContext(retriever=model))()
    first = await flt.apply(FilterInput(goal=GOAL, lines=lines))
    assert shown(first.text) and len(model.requests) == 1
    notice = ["\t[9001] alert 'Link copied'", "\t\tStaticText 'Link copied'"]
    after = [*lines[:3], *notice, *lines[3:]]
    second = await flt.apply(FilterInput(goal=GOAL, lines=after, history=["click('948')"]))
    assert len(model.requests) == 1, "a carried step makes no expansion call"
    assert "carried over" in str(second.notes["incremental"])
    assert shown(second.text) and "9001" in second.shown_bids
    # stuck: escalation builds the candidates again, asking for terms for the new history
    third = await flt.apply(FilterInput(goal=GOAL, lines=after,
                                        history=["click('948')", "noop()"]))
    assert len(model.requests) == 2 and "carried_over" not in third.notes
