"""``bm25``: lexical match of AXTree lines against the goal, the history and the thoughts.

Every line is a document: the words of its role, name, value and properties (URLs left
out: on a local site they match every query's host words). The query is the goal, the
recent actions and the recent thoughts. The best-scoring lines are kept with a few
lines around them, and the view is the structure-preserving tree
(:func:`structure.rebuild_with_structure`), so each hit comes with the headings, rows
and terms above it. Pure Python; milliseconds on a 7,000-line page.

Lexical matching is excellent when the goal names the element and useless when it does
not (a paraphrase): the ``focus`` filter uses it as one candidate stage among several.
"""

from __future__ import annotations

import time

from linewise.agent.filters.base import FilterInput, FilterResult, query_text
from linewise.agent.filters.retriever.recall_guard import guard_lines
from linewise.agent.filters.view.render import line_ranges
from linewise.agent.filters.view.structure import rebuild_with_structure
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.bm25 import LineRanker, with_context
from linewise.tokens import count_tokens

__all__ = ["BM25Filter"]


class BM25Filter:
    """Keep the ``top_k`` lines that best match goal + history + thoughts, ± ``context``
    lines, plus the recall guard's elements, in the structure-preserving view."""

    name = "bm25"

    def __init__(self, top_k: int = 20, context: int = 2) -> None:
        if top_k < 1 or context < 0:
            raise ValueError("top_k must be positive and context not negative")
        self.top_k = top_k
        self.context = context

    async def apply(self, observation: FilterInput) -> FilterResult:
        started = time.perf_counter()
        lines = observation.lines
        tree = LineTree(lines)
        hits = LineRanker(lines).top(query_text(observation), self.top_k)
        kept: set[int] = set()
        for index, _ in hits:
            kept.update(with_context(index, len(lines), self.context))
        guarded = guard_lines(tree, observation) - kept
        kept |= guarded
        if not kept:
            every = range(1, len(lines) + 1)
            return FilterResult(
                name=self.name, text=observation.text, kept_lines=list(every),
                shown_bids=observation.bids_on(every), tokens_full=observation.full_tokens,
                tokens_shown=observation.full_tokens,
                fallback_reason="no line shares a word with the goal, history or thoughts",
                latency_ms=(time.perf_counter() - started) * 1000,
            )
        view = rebuild_with_structure(tree, kept)
        return FilterResult(
            name=self.name, text=view.text, kept_lines=view.kept_lines,
            context_lines=view.context_lines,
            shown_bids=observation.bids_on([*view.kept_lines, *view.context_lines]),
            ranges=line_ranges(view.kept_lines), tokens_full=observation.full_tokens,
            tokens_shown=count_tokens(view.text),
            tokens_full_view=observation.stateless_tokens,
            latency_ms=(time.perf_counter() - started) * 1000,
            notes={"hits": [i + 1 for i, _ in hits],
                   "guard_added_lines": sorted(i + 1 for i in guarded)},
        )

