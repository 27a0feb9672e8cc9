"""Passage candidates: BM25 over the page's blocks, each read with its context.

A line-level index splits a description into fragments (``If``, ``key``, ``is in the
dictionary, remove it and return its value``) that each share a word or two with the
goal, and the entry they describe shares none (``term 'pop(key[, default])'``). Scored
as one passage — the term with its definition, a row with its cells, a list item, a
paragraph, under the term, heading or row it belongs to (the units of
:mod:`.context_embedding`) — the description meets a paraphrased goal as a whole, and a
hit proposes the block and its anchor, so the element comes with the words that found
it. The lexical counterpart of the embedding stage, at BM25's cost: milliseconds on a
20,000-line page once its units are read.
"""

from __future__ import annotations

from collections.abc import Sequence

from linewise.agent.filters.base import FilterInput, query_text
from linewise.agent.filters.stages.context_embedding import Unit
from linewise.agent.filters.stages.groups import Group
from linewise.agent.text.bm25 import LineRanker, with_context

__all__ = ["passage_groups", "passage_ranker"]


def passage_ranker(units: Sequence[Unit]) -> LineRanker:
    """BM25 with each unit's text as one document."""
    return LineRanker([unit.text for unit in units])


def passage_groups(
    units: Sequence[Unit], ranker: LineRanker, observation: FilterInput, n_lines: int, *,
    top_k: int = 10, context: int = 1,
) -> list[Group]:
    """The ``top_k`` passages that best match goal + history + thoughts, best first, each
    as its anchor line and the block's line with ± ``context`` lines."""
    groups: list[Group] = []
    for best, _ in ranker.top(query_text(observation), top_k):
        unit = units[best]
        lines = {unit.anchor, *with_context(unit.index, n_lines, context)}
        groups.append(Group("passages", tuple(sorted(lines))))
    return groups
