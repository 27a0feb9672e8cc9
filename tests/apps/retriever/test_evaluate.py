"""Scoring the unit stage alone on real filter-eval cases, with the offline MiniLM."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from linewise.agent.text.embedders import MiniLMEmbedder
from linewise.apps.filter_eval import load_cases
from linewise.apps.retriever.evaluate import evaluate_stage, format_stage_table

CASES = Path(__file__).parents[3] / "tasks" / "filter-cases"


class SameVector:
    """Every text the same vector: the ranking is the page's order, an embedder that
    understands nothing."""

    name = "same"

    async def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)


@pytest.mark.slow
async def test_a_real_embedder_finds_more_than_page_order_and_recall_grows_with_k() -> None:
    cases = load_cases(*sorted(CASES.glob("docs.*.json")))  # python3-doc pages, 500-1356 lines
    minilm = {s.kind: s for s in await evaluate_stage(cases, MiniLMEmbedder())}
    blind = {s.kind: s for s in await evaluate_stage(cases, SameVector())}
    assert minilm["all"].cases == blind["all"].cases == len(cases)
    for scores in (minilm, blind):
        for score in scores.values():
            assert 0 <= score.recall[5] <= score.recall[10] <= score.recall[20] <= 1
    assert minilm["all"].recall[10] >= 0.75 and blind["all"].recall[20] <= 0.25
    table = format_stage_table([*minilm.values(), *blind.values()])
    assert table.splitlines()[0].split() == ["embedder", "kind", "cases", "recall@5",
                                             "recall@10", "recall@20"]
    assert len(table.splitlines()) == 1 + len(minilm) + len(blind)
