"""How well an embedder finds what a goal needs: the unit stage scored on its own.

For each filter-eval case (``apps.filter_eval.FilterCase``) the page's units are ranked
by the embedder for the query the filter forms (goal, recent actions, thoughts), and a
gold item counts as found at ``k`` when one of the ``k`` best units proposes its line —
its anchor, or its own line with one line either side, exactly what
:func:`linewise.agent.filters.stages.context_embedding.unit_groups` proposes. Recall is per
case, then averaged, by goal kind. Scoring the stage alone, not the whole filter,
separates what the learned model adds from what the other stages already find; the whole
filter is scored by ``linewise filter-eval``.

With a reranker, the embedder's ``candidates`` best units are scored again by the
reranker and put first in its order, the rest after them in the embedder's: recall at
``k`` ≤ ``candidates`` then measures the reranker's order, and its ceiling is the
embedder's recall at ``candidates``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from linewise.agent.filters.base import FilterInput, query_text
from linewise.agent.filters.stages.context_embedding import Unit, UnitIndex, page_units
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.embedders import Embedder, normalised
from linewise.agent.text.learned import TrainedReranker
from linewise.apps.filter_eval import GOAL_KINDS, FilterCase

__all__ = ["RememberedEmbedder", "StageScore", "evaluate_stage", "format_stage_table"]

KS = (5, 10, 20)


class RememberedEmbedder:
    """An embedder whose vectors are kept by text, for an evaluation that ranks the same
    pages more than once: a reranker's rows reuse the pages the embedder's own row
    embedded, so their time is the reranker's alone."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.name = embedder.name
        self._vectors: dict[str, np.ndarray] = {}

    async def embed(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            vectors = np.asarray(await self.embedder.embed(missing), dtype=np.float32)
            self._vectors.update(zip(missing, vectors, strict=True))
        return np.stack([self._vectors[t] for t in texts])


class StageScore(BaseModel):
    """One embedder's recall of gold items among its best units, by goal kind."""

    embedder: str
    kind: str
    cases: int
    recall: dict[int, float]
    """k -> mean per-case recall of gold lines proposed by the k best units."""


def _gold_lines(case: FilterCase, tree: LineTree) -> set[int]:
    gold = {tree.bid_line[b] for b in case.gold_bids if b in tree.bid_line}
    return gold | {n - 1 for n in case.gold_lines if 0 < n <= len(tree)}


def _proposed(unit: Unit, size: int) -> set[int]:
    return {unit.anchor, *range(max(0, unit.index - 1), min(size, unit.index + 2))}


async def _case_recall(case: FilterCase, embedder: Embedder,
                       reranker: TrainedReranker | None, candidates: int,
                       ) -> dict[int, float] | None:
    tree = LineTree(list(case.lines))
    gold = _gold_lines(case, tree)
    units = page_units(tree)
    if not gold or not units:
        return None
    query = query_text(FilterInput(goal=case.goal, lines=case.lines, history=case.history))
    vectors = normalised(await embedder.embed([u.text for u in units] + [query]),
                         len(units) + 1, embedder.name)
    scores = vectors[:-1] @ vectors[-1]
    order = np.argsort(-scores, kind="stable")
    if reranker is not None:
        index = UnitIndex(embedder, reranker=reranker, candidates=candidates)
        order = await index.rerank(query, units, order)
    recall = {}
    for k in KS:
        found: set[int] = set()
        for i in order[:k]:
            found |= _proposed(units[int(i)], len(tree))
        recall[k] = len(gold & found) / len(gold)
    return recall


async def evaluate_stage(
    cases: Sequence[FilterCase], embedder: Embedder, *,
    reranker: TrainedReranker | None = None, candidates: int = 30,
) -> list[StageScore]:
    """Recall at each of :data:`KS` by goal kind, and over all cases (kind ``all``);
    with ``reranker``, of its order of the embedder's ``candidates`` best units."""
    name = embedder.name if reranker is None else f"{embedder.name}+{reranker.name}"
    by_kind: dict[str, list[dict[int, float]]] = {}
    for case in cases:
        recall = await _case_recall(case, embedder, reranker, candidates)
        if recall is not None:
            by_kind.setdefault(case.kind, []).append(recall)
            by_kind.setdefault("all", []).append(recall)
    return [StageScore(embedder=name, kind=kind, cases=len(rows),
                       recall={k: round(statistics.fmean(r[k] for r in rows), 4) for k in KS})
            for kind in (*GOAL_KINDS, "all") if (rows := by_kind.get(kind))]


def format_stage_table(scores: Sequence[StageScore]) -> str:
    header = ["embedder", "kind", "cases", *(f"recall@{k}" for k in KS)]
    rows = [[s.embedder, s.kind, str(s.cases), *(f"{100 * s.recall[k]:.1f}%" for k in KS)]
            for s in scores]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in [header, *rows])
