"""Passages: BM25 over the page's blocks read with their context, on real captured trees
(Python's builtins and json docs). A paraphrased goal meets the description of the
entry it needs as a whole, where the description's fragments, line by line, do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.focus import FocusConfig, FocusFilter
from linewise.agent.filters.stages.candidates import lexical_groups
from linewise.agent.filters.stages.followed import history_groups
from linewise.agent.filters.stages.page_index import PageIndex
from linewise.agent.filters.stages.passages import passage_groups
from linewise.agent.text.embedders import MiniLMEmbedder
from tests.support.trees import line_of, tree_lines

PARAPHRASES = {
    "Which built-in removes a named attribute from an object?": "term 'delattr(",
    "Which built-in tells whether an object can be called like a function?":
        "term 'callable(",
    "Which built-in pairs up the items of several iterables?": "term 'zip(",
}


def rank(groups: list[tuple[int, ...]], lines: list[str], entry: str) -> int | None:
    return next((k for k, group in enumerate(groups)
                 if any(entry in lines[i] for i in group)), None)


@pytest.mark.parametrize(("goal", "entry"), list(PARAPHRASES.items()))
def test_a_described_entry_ranks_first_as_a_passage(goal: str, entry: str) -> None:
    lines = tree_lines("docs-functions.txt")
    page = PageIndex(lines)
    observation = FilterInput(goal=goal, lines=lines)
    passages = passage_groups(page.units, page.passage_ranker, observation, len(lines))
    assert (found := rank([g.lines for g in passages], lines, entry)) is not None
    assert found <= 2
    by_line = [g.lines for g in lexical_groups(lines, observation, ranker=page.ranker)]
    assert (rank(by_line, lines, entry) or 200) > 20  # line by line it is far down


def test_the_followed_section_proposes_its_best_passages() -> None:
    lines = tree_lines("docs-json.txt")
    page = PageIndex(lines)
    contents_link = line_of(lines, r"link 'Basic Usage'")
    bid = lines[contents_link].split("[", 1)[1].split("]", 1)[0]
    observation = FilterInput(
        goal="Open the basic usage part from the contents, then find the function that "
             "turns a Python object into a JSON string.",
        lines=lines, history=[f"click('{bid}')"])
    entry = "term 'json.dumps("
    # Without the section's entries listed, only its passages can bring json.dumps.
    plain = history_groups(page.tree, page.ranker, observation, entries=0)
    assert rank(plain, lines, entry) is None
    with_passages = history_groups(page.tree, page.ranker, observation, entries=0,
                                   passages=(page.units, page.passage_ranker))
    assert rank(with_passages, lines, entry) is not None


async def test_a_paraphrased_entry_is_in_the_model_free_view() -> None:
    lines = tree_lines("docs-functions.txt")
    result = await FocusFilter(None, FocusConfig.from_preset("candidates-items")).apply(FilterInput(
        goal="Which built-in removes a named attribute from an object?", lines=lines))
    assert "term 'delattr(" in result.text
    assert result.notes["stages"]["passages"]
    assert result.tokens_shown < 0.3 * result.tokens_full


async def test_a_units_filter_whose_embedder_cannot_load_goes_on_without_it(
    tmp_path: Path,
) -> None:
    """As when the ``embedding`` extra is not installed: the stage is left out for the
    episode, the reason is in every step's notes, and the other stages still find the
    entry."""
    broken = MiniLMEmbedder(onnx_path=tmp_path / "missing.onnx")
    lines = tree_lines("docs-functions.txt")
    flt = FocusFilter(None, FocusConfig.from_preset("candidates-units"), embedder=broken)
    goal = "Which built-in removes a named attribute from an object?"
    for _ in range(2):
        result = await flt.apply(FilterInput(goal=goal, lines=lines))
        assert "term 'delattr(" in result.text
        assert "unavailable" in str(result.notes["embedding_error"])
        assert "units" not in result.notes["stages"]
        assert "units" not in result.notes["stages_run"]
        lines = [*lines[:-1], "\tStaticText 'a changed last line'"]
