"""The history's structure as a candidate stage: the section a followed contents link
leads to, and the controls beside the last one used. On the captured json docs page."""

from __future__ import annotations

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.focus import FocusConfig, FocusFilter
from linewise.agent.filters.stages.followed import followed_section, history_groups, same_title
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.history import PastStep
from linewise.agent.text.bm25 import LineRanker
from tests.support.trees import line_of, tree_lines

GOAL = ("Open the part about errors from the contents, then read the entry of the class "
        "it documents.")


def test_same_title_sets_numbering_and_pilcrows_aside() -> None:
    assert same_title("2.7.3. Error-related Options", "2.7.3. Error-related Options¶")
    assert same_title("Mapping Types — dict", "4.10. Mapping Types — dict")
    assert same_title("Template strings", "Template strings and their use")
    assert not same_title("Exceptions", "Encoders and Decoders")
    assert not same_title("a", "abc")  # too short to be a shortened title


def test_a_followed_contents_link_proposes_its_section_first() -> None:
    lines = tree_lines("docs-json.txt")
    tree = LineTree(lines)
    heading = line_of(lines, r"\[1881\] heading 'Exceptions'")
    entry = line_of(lines, r"\[1884\] term 'exception json.JSONDecodeError")
    observation = FilterInput(goal=GOAL, lines=lines, history=["click('2377')"])
    section = followed_section(tree, observation)
    assert section is not None and section.start == heading and entry in section
    assert section.stop <= line_of(lines, r"heading 'Standard Compliance")
    groups = history_groups(tree, LineRanker(lines), observation)
    assert heading in groups[0]
    assert any(entry in group for group in groups)
    # a link to another page, or no link at all, leads to no section
    assert followed_section(tree, observation.model_copy(
        update={"history": [PastStep.of_text("click('241')")]})) is None
    assert followed_section(tree, observation.model_copy(
        update={"history": [PastStep.of_text("scroll(0, 500)")]})) is None


def test_the_controls_beside_the_last_one_used_are_candidates() -> None:
    lines = tree_lines("docs-json.txt")
    tree = LineTree(lines)
    observation = FilterInput(goal="Go back one page.", lines=lines, history=["click('178')"])
    [group] = history_groups(tree, LineRanker(lines), observation)
    assert line_of(lines, r"\[180\] link 'previous'") in group
    assert line_of(lines, r"\[176\] link 'modules'") in group
    assert len(group) <= 40


async def test_the_view_after_following_a_link_holds_the_section_entry() -> None:
    lines = tree_lines("docs-json.txt")
    flt = FocusFilter(None, FocusConfig.from_preset("candidates-items"))
    result = await flt.apply(FilterInput(goal=GOAL, lines=lines, history=["click('2377')"]))
    assert "[1884] term 'exception json.JSONDecodeError" in result.text
    stages = result.notes["stages"]
    assert isinstance(stages, dict)
    assert line_of(lines, r"\[1881\] heading 'Exceptions'") + 1 in stages["followed"]
    assert result.reduction > 0.7


async def test_a_carried_step_after_following_a_link_shows_where_it_led() -> None:
    # an in-page link changes the tree by no more than a focus mark: the step is carried
    # over without a model call, and must still show the section the link opened
    import json

    from linewise.agent.filters.stages.query_expansion import QueryExpander
    from linewise.testing import FunctionModel

    lines = tree_lines("docs-json.txt")
    model = FunctionModel(lambda messages, info: json.dumps({"terms": ["JSON"]}))
    flt = FocusFilter(None, FocusConfig.from_preset("expand-items"),
                      expander=QueryExpander(model))
    first = await flt.apply(FilterInput(goal=GOAL, lines=lines, must_keep_bids=["2377"]))
    assert "2377" in first.shown_bids  # the agent clicks a link it was shown
    link = line_of(lines, r"\[2377\] link 'Exceptions'")
    after = list(lines)
    after[link] += ", focused"
    result = await flt.apply(FilterInput(goal=GOAL, lines=after, history=["click('2377')"]))
    assert "carried over" in str(result.notes["incremental"]) and len(model.requests) == 1
    heading = line_of(lines, r"\[1881\] heading 'Exceptions'")
    assert heading + 1 in result.kept_lines
    assert "[1884] term 'exception json.JSONDecodeError" in result.text
