"""The focus filter built from configuration: presets, stages, settings and their errors."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.builtins import focus_config
from linewise.agent.filters.focus import FocusConfig, FocusFilter
from linewise.agent.filters.registry import FilterContext, filter_maker, get_filter
from linewise.agent.filters.stages.catalog import FOCUS_STAGES
from linewise.agent.filters.stages.presets import (
    ALWAYS,
    DEFAULT_PRESET,
    PRESETS,
    STAGES,
    check_stages,
    parse_stages,
)
from linewise.agent.filters.stages.query_expansion import QueryExpander
from linewise.apps.filter_eval import load_cases
from linewise.errors import ConfigError
from linewise.settings import FilterSettings, LinewiseSettings
from linewise.testing import CallInfo, FunctionModel
from tests.support.paths import DATA, REPO
from tests.support.trees import WordHashEmbedder, tree_lines

BEFORE = json.loads((DATA / "filters" / "focus_variants_before_presets.json").read_text())
CASES = ["large.built.form.2", "large.python3-doc.json.2", "large.valgrind.mc-manual.1",
         "heldout.python3-doc.statistics.2"]
OLD_NAMES = {  # the filter measured under this name -> its preset now
    "focus": "choose", "focus-candidates": "candidates", "focus-items": "items",
    "focus-candidates-items": "candidates-items", "focus-candidates-units": "candidates-units",
    "focus-expand-items": "expand-items", "focus-expand-units": "expand-units",
}


def scripted_retriever(messages: list[dict[str, Any]], info: CallInfo) -> str:
    """Expansion calls get fixed terms; choosing calls a third of the way and the last line
    shown (what recorded the golden file: keep it unchanged)."""
    schema = info.params.get("response_format", {}).get("json_schema", {}).get("name")
    if schema == "terms":
        return json.dumps({"terms": ["text", "string", "deviation", "city"]})
    shown = re.findall(r"^(\d+)\|", messages[-1]["content"], re.M)
    a, b = shown[len(shown) // 3], shown[-1]
    return json.dumps({"think": "t", "ranges": [[int(a), int(a) + 2], [int(b), int(b)]]})


def digest(kept: list[int]) -> str:
    return f"{len(kept)}:{hashlib.sha256(json.dumps(kept).encode()).hexdigest()[:16]}"


@pytest.mark.slow
@pytest.mark.parametrize("old_name", list(OLD_NAMES))
async def test_each_preset_keeps_the_lines_its_measured_variant_kept(old_name: str) -> None:
    """--filter focus --focus-preset P gives, step for step, the kept lines of the variant
    P replaces, as recorded before presets existed (with and without an embedder set)."""
    cases = {c.id: c for c in load_cases(REPO / "tasks" / "filter-cases") if c.id in CASES}
    preset = OLD_NAMES[old_name]
    for embedding in (False, True):
        settings = FilterSettings(name="focus", focus_preset=preset,
                                  embedding_model="word-hash" if embedding else None)
        for case_id in CASES:
            case = cases[case_id]
            made = filter_maker(FilterContext(settings, FunctionModel(scripted_retriever),
                                              embedder=WordHashEmbedder))()
            first = await made.apply(FilterInput(goal=case.goal, lines=case.lines,
                                                 history=case.history,
                                                 focused_bid=case.focused_bid))
            half = len(case.lines) // 2
            lines = [*case.lines[:half], "\t[99001] alert 'Saved'", "\t\tStaticText 'Saved'",
                     *case.lines[half:]]
            second = await made.apply(FilterInput(
                goal=case.goal, lines=lines, history=[*case.history, "scroll(0, 200)"],
                focused_bid=case.focused_bid))
            key = f"{old_name}|{case_id}|{int(embedding)}"
            assert digest(first.kept_lines) == BEFORE["kept"][f"{key}|1"], key
            assert digest(second.kept_lines) == BEFORE["kept"][f"{key}|2"], key


def test_every_research_alias_is_its_preset() -> None:
    context = FilterContext(retriever=FunctionModel(scripted_retriever),
                            embedder=WordHashEmbedder)
    for name in PRESETS:
        alias = get_filter(f"focus-{name}")
        assert alias.hidden
        via_alias = alias.bind(context)()
        via_settings = filter_maker(FilterContext(
            FilterSettings(name="focus", focus_preset=name), context.retriever,
            embedder=WordHashEmbedder))()
        assert isinstance(via_alias, FocusFilter) and isinstance(via_settings, FocusFilter)
        assert via_alias.config == via_settings.config
        assert via_alias.name == f"focus-{name}" and via_settings.name == "focus"
        # the chooser and the stages that ask a model decide whether it needs the retriever
        asks = PRESETS[name].chooser == "model" or "expansion" in PRESETS[name].stages
        assert alias.needs_retriever is asks


def test_the_stage_list_is_the_order_the_candidates_take_turns_in() -> None:
    assert list(STAGES) == [ALWAYS, *(s.name for s in FOCUS_STAGES if s.turns)]
    assert check_stages(["embedding", "lexical", "lexical"]) == ("guard", "lexical", "embedding")
    assert parse_stages(" named, guard ,outline,") == ("guard", "named", "outline")


async def test_settings_choose_the_stages_that_run() -> None:
    """settings -> filter -> exactly the configured stages in the step's notes."""
    lines = tree_lines("docs-json.txt")
    observation = FilterInput(goal="Show me json.loads", lines=lines)
    settings = FilterSettings(name="focus", focus_preset="candidates",
                              focus_stages=("lexical", "outline"))
    made = filter_maker(FilterContext(settings))()
    assert isinstance(made, FocusFilter)
    assert made.config.stages == ("guard", "lexical", "outline")
    assert made.config.chooser == "none" and made.model is None and made.expander is None
    result = await made.apply(observation)
    assert result.notes["stages_run"] == ["guard", "lexical", "outline"]
    assert set(result.notes["stages"]) <= {"guard", "lexical", "outline"}
    assert result.notes["stages"]["lexical"] and not result.calls
    # the preset's own stages, with an expander and the units of an embedder
    model = FunctionModel(scripted_retriever)
    full = filter_maker(FilterContext(FilterSettings(name="focus"), model,
                                      embedder=WordHashEmbedder))()
    assert isinstance(full, FocusFilter) and DEFAULT_PRESET == "expand-shared-units"
    result = await full.apply(observation)
    assert result.notes["stages_run"] == list(PRESETS["expand-shared-units"].stages)
    assert {"expansion", "units"} <= set(result.notes["stages"])
    assert [c.purpose for c in result.calls] == ["retriever"]  # the expansion call only


def test_the_environment_sets_the_preset_and_the_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEWISE_FILTER__FOCUS_PRESET", "candidates-items")
    monkeypatch.setenv("LINEWISE_FILTER__FOCUS_STAGES", "named, lexical")
    settings = LinewiseSettings().filter
    assert settings.focus_preset == "candidates-items"
    assert settings.focus_stages == ("named", "lexical")
    config = focus_config(settings)
    assert config.stages == ("guard", "named", "lexical")
    assert config.chooser == "none" and config.items


def test_unknown_stages_and_presets_are_config_errors_listing_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown focus stage 'nope'") as caught:
        FocusConfig(stages=("lexical", "nope"))
    assert all(stage in str(caught.value) for stage in STAGES)
    with pytest.raises(ConfigError, match="unknown focus stages 'a', 'b'"):
        parse_stages("a,lexical,b")
    with pytest.raises(ConfigError, match="unknown focus preset 'fast'") as caught:
        FocusConfig.from_preset("fast")
    assert all(name in str(caught.value) for name in PRESETS)
    # through the registry: refused when the filter is bound, before any episode
    focus = get_filter("focus")
    for settings in (FilterSettings(name="focus", focus_preset="fast"),
                     FilterSettings(name="focus", focus_stages=("lexical", "nope"))):
        with pytest.raises(ConfigError, match="unknown focus"):
            focus.bind(FilterContext(settings, FunctionModel(scripted_retriever)))


def test_what_a_configuration_needs_is_checked() -> None:
    focus = get_filter("focus")
    assert focus.needs_retriever  # the default preset expands the query
    model_free = FilterSettings(name="focus", focus_preset="candidates-items")
    assert not focus.needs_retriever_for(model_free)
    assert isinstance(focus.bind(FilterContext(model_free))(), FocusFilter)
    with pytest.raises(ConfigError, match="needs a retriever"):
        focus.bind(FilterContext(FilterSettings(name="focus", focus_preset="choose")))
    with pytest.raises(ConfigError, match="--defend needs"):
        focus.bind(FilterContext(model_free.model_copy(update={"defend": True})))
    # the filter itself refuses a configuration it lacks the parts for
    with pytest.raises(ConfigError, match="a retriever model"):
        FocusFilter(None, FocusConfig(chooser="model"))
    with pytest.raises(ConfigError, match="an expander"):
        FocusFilter(None, FocusConfig.from_preset("expand-items"))
    with pytest.raises(ConfigError, match="an embedder"):
        FocusFilter(None, FocusConfig.from_preset("candidates-units"))
    # and leaves out what its configuration does not use
    unused = FocusFilter(FunctionModel(scripted_retriever), FocusConfig(
        chooser="none", stages=("lexical",)), embedder=WordHashEmbedder(),
        expander=QueryExpander(FunctionModel(scripted_retriever)))
    assert unused.model is None and unused.expander is None and unused.embedder is None


def test_each_stage_is_one_object_holding_its_turns() -> None:
    names = [stage.name for stage in FOCUS_STAGES]
    assert len(set(names)) == len(names) and names[0] == ALWAYS
    assert FOCUS_STAGES[0].turns == 0 and all(stage.turns > 0 for stage in FOCUS_STAGES[1:])
    # the stages whose best groups the view keeps whatever the model chooses
    assert [s.name for s in FOCUS_STAGES if s.top] == ["named", "followed", "lexical",
                                                      "expansion"]
    assert {s.name: s.needs for s in FOCUS_STAGES if s.needs} == {
        "expansion": "retriever", "units": "embedder", "embedding": "embedder"}
