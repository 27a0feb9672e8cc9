"""Candidate lines for the retriever model: cheap stages propose, a token budget decides.

Each stage proposes *groups* of lines (0-based indices), best first:

- ``guard``: the focused element and the recall guard's elements (always taken);
- ``named``: the lines whose names hold what the goal names verbatim, quoted or
  code-like (:mod:`.term_match`);
- ``lexical``: BM25 hits on goal + history + thoughts, with ± context lines;
- ``passages``: BM25 hits on the page's blocks, each read with the term, heading or row
  it belongs to (:mod:`.passages`): a description met as a whole;
- ``outline``: search boxes, dialogs, headings, landmarks, form fields, tabs, table
  headers and terms (:mod:`..view.outline`);
- ``expansion``: BM25 hits on the terms the retriever model expects the needed element
  to show (:mod:`.query_expansion`);
- ``followed``: the section an in-page link of the last action leads to (its heading,
  best passages, best lines and entries), and the neighbourhood of the element it named
  (:mod:`.followed`);
- ``referred``: the entries (terms, headings) that the best lines of the stages above
  mention by name — a summary table's link, an option named in prose
  (:func:`.term_match.referred_entries`);
- ``changed``: runs of lines that changed since the last step;
- ``units``: the page's blocks most similar to the query, each read with its term,
  heading or row (:mod:`.context_embedding`);
- ``embedding``: chunks most similar to the query, each with the term, heading or row
  it belongs to (only when an embedder is configured).

Which stages run is the filter's configuration (:mod:`.presets`); each stage, with
its description and its turns, is one object of :mod:`.catalog`, which calls the
functions here; :func:`.budget.fill_budget` takes their groups into the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from linewise.agent.filters.base import FilterInput, query_text
from linewise.agent.filters.retriever.recall_guard import guard_lines
from linewise.agent.filters.stages.groups import Group
from linewise.agent.filters.stages.term_match import goal_terms, referred_entries, term_groups
from linewise.agent.filters.view.outline import OutlineEntry, by_priority, outline_entries
from linewise.agent.filters.view.page_diff import PageDiff, diff_pages
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.bm25 import LineRanker, with_context
from linewise.agent.text.chunking import chunk_lines
from linewise.agent.text.embedders import Embedder, normalised

__all__ = [
    "changed_groups",
    "embedding_groups",
    "guard_groups",
    "lexical_groups",
    "named_groups",
    "outline_groups",
    "referred_groups",
]

# Roles a matching line's context must bring along: what names the thing it describes.
_ANCHOR_ROLES = frozenset({"term", "heading", "row", "listitem", "article", "columnheader"})


def guard_groups(tree: LineTree, observation: FilterInput) -> list[Group]:
    lines = guard_lines(tree, observation)
    return [Group("guard", tuple(sorted(lines)))] if lines else []


def named_groups(
    tree: LineTree, ranker: LineRanker, observation: FilterInput, *, context: int = 2,
    per_term: int = 2,
) -> list[Group]:
    """The lines whose names hold a term the goal names verbatim, best first, each with
    ``context`` lines either side; none when the goal names nothing that way."""
    terms = goal_terms(observation.goal)
    return [Group("named", g) for g in term_groups(
        tree, ranker, terms, per_term=per_term, context=context, lexical=False)]


_REFERRING_STAGES = ("named", "expansion", "lexical", "passages")


def referred_groups(
    tree: LineTree, entries: Sequence[tuple[int, str]], groups: Mapping[str, list[Group]],
    *, context: int = 2, per_stage: int = 4,
) -> list[Group]:
    """The entries the best groups of the word-matching stages mention (a summary
    table's ``stdev()`` link, an option named in prose), each with ``context`` lines."""
    mentioning = [i for stage in _REFERRING_STAGES for group in groups.get(stage, ())[:per_stage]
                  for i in group.lines]
    return [Group("referred", tuple(with_context(entry, len(tree), context)))
            for entry in referred_entries(entries, tree, mentioning)]


def lexical_groups(
    lines: Sequence[str], observation: FilterInput, *, limit: int = 200, context: int = 2,
    ranker: LineRanker | None = None,
) -> list[Group]:
    """BM25 hits, best first, each with ``context`` lines either side; ``ranker`` is the
    page's index when the caller keeps one (:class:`.page_index.PageIndex`)."""
    ranker = ranker if ranker is not None else LineRanker(lines)
    hits = ranker.top(query_text(observation), limit)
    return [Group("lexical", tuple(with_context(i, len(lines), context))) for i, _ in hits]


def outline_groups(lines: Sequence[str],
                   entries: Sequence[OutlineEntry] | None = None) -> list[Group]:
    """The outline's entries by priority (``entries``: the page's, when already read)."""
    found = entries if entries is not None else outline_entries(lines)
    return [Group("outline", (entry.index,)) for entry in by_priority(found)]


def changed_groups(
    previous: Sequence[str] | None, lines: Sequence[str], *, max_fraction: float = 0.5,
    diff: PageDiff | None = None,
) -> list[Group]:
    """Runs of lines inserted or replaced since ``previous`` (``diff``: their diff, when
    the caller has it); none when most of the page changed (a new page: every line would
    be a candidate)."""
    if previous is None or list(previous) == list(lines):
        return []
    runs = (diff if diff is not None else diff_pages(previous, lines)).changed
    if sum(len(r) for r in runs) > max_fraction * len(lines):
        return []
    return [Group("changed", tuple(r)) for r in runs if len(r)]


async def embedding_groups(
    embedder: Embedder, tree: LineTree, observation: FilterInput, *, top_k: int = 10
) -> list[Group]:
    """The ``top_k`` chunks most similar to the query, each with its nearest anchor
    ancestor (term, heading, row…): a matching description brings the element it
    describes, which may sit outside the chunk."""
    chunks = chunk_lines(tree.lines, 100, 10)
    if not chunks:
        return []
    texts = [query_text(observation), *(c.text for c in chunks)]
    vectors = normalised(await embedder.embed(texts), len(texts), "embedder")
    scores = vectors[1:] @ vectors[0]
    groups: list[Group] = []
    for best in np.argsort(-scores, kind="stable")[:top_k]:
        members = {n - 1 for n in chunks[int(best)].line_numbers}
        for index in list(members):
            for ancestor in tree.ancestors(index):
                if tree.parsed(ancestor).role in _ANCHOR_ROLES:
                    members.add(ancestor)
                    break
        groups.append(Group("embedding", tuple(sorted(members))))
    return groups
