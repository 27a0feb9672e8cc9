"""Terms a goal names verbatim, and the ``named`` candidate stage, on a real captured tree
(Python's json docs): the entry a goal names comes first, where BM25 ranks it below the
short lines that only mention it."""

from __future__ import annotations

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.focus import FocusConfig, FocusFilter
from linewise.agent.filters.stages.candidates import lexical_groups, named_groups
from linewise.agent.filters.stages.term_match import (
    entry_names,
    goal_terms,
    mentions,
    referred_entries,
    term_hits,
)
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.bm25 import LineRanker, words
from tests.support.paths import TREES
from tests.support.trees import line_of, tree_lines

ENTRY = "term 'json.loads(s, *"


def json_tree() -> list[str]:
    return (TREES / "docs-json.txt").read_text().split("\n")


def test_goal_terms_are_quoted_text_and_code_like_words() -> None:
    assert goal_terms("Open the documentation of json.loads.") == ["json.loads"]
    assert goal_terms("Click the page's 'Submit' button") == ["Submit"]
    assert goal_terms('Type "Add to cart" in the box') == ["Add to cart"]
    assert goal_terms("Set --malloc-fill, max_retries and innerText; call open() "
                      "or dict.pop(), e.g. now") == [
        "--malloc-fill", "max_retries", "innerText", "open", "dict.pop"]
    # Plain prose names nothing: apostrophes, hyphenated words and abbreviations.
    assert goal_terms("What is the site's heading? It's a two-step task, i.e. short") == []
    assert goal_terms("Find 'json.loads' and JSON.LOADS") == ["json.loads"]  # each once


def test_the_named_entry_comes_before_the_lines_that_mention_it() -> None:
    lines = json_tree()
    tree, ranker = LineTree(lines), LineRanker(lines)
    observation = FilterInput(goal="Open the documentation of json.loads.", lines=lines)
    named = named_groups(tree, ranker, observation)
    assert named and any(ENTRY in lines[i] for i in named[0].lines)
    # BM25 alone puts several short "loads" lines first.
    top = lexical_groups(lines, observation, ranker=ranker)[:3]
    assert not any(ENTRY in lines[i] for group in top for i in group.lines)
    # A goal that names nothing verbatim adds no stage.
    prose = FilterInput(goal="Which routine parses a JSON document?", lines=lines)
    assert named_groups(tree, ranker, prose) == []


def test_after_the_entry_comes_the_link_to_its_anchor() -> None:
    """A table of contents links ``dumps()`` to ``#json.dumps``: that link opens the
    entry, so it ranks before the text and links that only mention the name."""
    lines = json_tree()
    tree, ranker = LineTree(lines), LineRanker(lines)
    first, *links, text = term_hits(tree, ranker, "json.dumps", 4)
    # Before this rule the link 'json.dumps()' led, its name starting with the term.
    assert "term 'json.dumps(" in lines[first]
    assert {lines[i].strip().split(",")[0] for i in links} == {
        "[2236] link 'json.dumps()'", "[2332] link 'dumps()'"}
    assert all(lines[i].endswith("#json.dumps'") for i in links)
    assert "StaticText 'json.dumps()'" in lines[text]


async def test_the_named_entry_is_kept_in_the_view() -> None:
    lines = json_tree()
    result = await FocusFilter(None, FocusConfig.from_preset("candidates-items")).apply(
        FilterInput(goal="Open the documentation of json.loads.", lines=lines))
    assert ENTRY in result.text
    assert result.notes["stages"]["named"]
    assert result.tokens_shown < 0.3 * result.tokens_full


def test_a_word_and_its_inflections_meet() -> None:
    assert len(set(words("remove removes removed removing"))) == 1
    assert len(set(words("serialize serialized serializes"))) == 1
    assert words("searching lists") == words("search list")
    assert words("json.dumps max_retries") == ["json", "dump", "max", "retri"]


def test_a_mention_leads_to_the_entry_it_names() -> None:
    functions = tree_lines("docs-functions.txt")
    tree = LineTree(functions)
    entries = entry_names(tree)
    summary_link = line_of(functions, r"\[440\] link 'delattr\(\)'")  # the summary table
    assert mentions(tree, summary_link) == ["delattr"]  # its fragment and its name
    [entry] = referred_entries(entries, tree, [summary_link])
    assert "term 'delattr(object, name)'" in functions[entry]

    docs = json_tree()
    tree = LineTree(docs)
    entries = entry_names(tree)
    link = line_of(docs, r"\[2236\] link 'json\.dumps\(\)'")  # in the command-line section
    assert any("term 'json.dumps(" in docs[i] for i in referred_entries(entries, tree, [link]))
    option = line_of(docs, r"StaticText '--sort-keys'")  # an option named in prose
    [entry] = referred_entries(entries, tree, [option])
    assert "term '--sort-keys" in docs[entry]
    # Plain words refer to nothing.
    prose = line_of(docs, r"StaticText '. The input encoding should be")
    assert mentions(tree, prose) == [] and referred_entries(entries, tree, [prose]) == []
