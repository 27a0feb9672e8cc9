"""The unit stage's recall on the held-out filter cases, per embedder, and its time per page.

For each held-out set (``heldout``, ``heldout2``, ``heldout3`` of tasks/filter-cases: page
families no retriever was trained on; see benchmarks/make_filter_cases.py) the page's
units are ranked by each embedder for the case's query, and recall@5/10/20 of the gold
lines is printed by goal kind (``linewise.apps.retriever.evaluate``). ``--weights DIR``
adds a trained retriever (``linewise retriever train``) beside the offline MiniLM; a
reranker's folder reorders the first embedder's ``--candidates`` best units. The
seconds per page are the embedding of a page's units, the cost a new page pays once
(later steps on the same page embed only the query); a reranker's row reuses the first
embedder's vectors, so its seconds are the reranker's own.

    python benchmarks/retriever_stage.py
    python benchmarks/retriever_stage.py --weights runs/retriever --sets heldout3
    python benchmarks/retriever_stage.py --weights runs/reranker --candidates 30
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

from linewise.agent.text.embedders import Embedder, MiniLMEmbedder
from linewise.agent.text.learned import open_weights_by_kind
from linewise.apps.filter_eval import load_cases
from linewise.apps.retriever.evaluate import (
    RememberedEmbedder,
    evaluate_stage,
    format_stage_table,
)

CASES = Path(__file__).parents[1] / "tasks" / "filter-cases"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, action="append", default=[],
                        help="a trained retriever's folder (repeatable)")
    parser.add_argument("--sets", nargs="+", default=["heldout", "heldout2", "heldout3"])
    parser.add_argument("--no-minilm", action="store_true", help="leave the baseline out")
    parser.add_argument("--candidates", type=int, default=30,
                        help="units a reranker reorders (default 30)")
    args = parser.parse_args()
    embedders: list[Embedder] = [] if args.no_minilm else [MiniLMEmbedder()]
    trained, rerankers = open_weights_by_kind(args.weights)
    embedders += trained
    if rerankers and not embedders:
        parser.error("a reranker reorders an embedder's units: keep MiniLM or give an "
                     "embedder's --weights")
    if rerankers:
        embedders[0] = RememberedEmbedder(embedders[0])
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for name in args.sets:
        cases = load_cases(*sorted(CASES.glob(f"{name}.*.json")))
        pages = len({tuple(c.lines[:50]) for c in cases})
        print(f"\n## {name}: {len(cases)} cases on {pages} pages")
        for embedder in embedders:
            started = time.perf_counter()
            scores = await evaluate_stage(cases, embedder)
            seconds = time.perf_counter() - started
            print(format_stage_table(scores))
            print(f"{embedder.name}: {seconds:.1f} s, {seconds / len(cases):.2f} s per case "
                  "(each case embeds its whole page)")
        for reranker in rerankers:
            started = time.perf_counter()
            scores = await evaluate_stage(cases, embedders[0], reranker=reranker,
                                          candidates=args.candidates)
            seconds = time.perf_counter() - started
            print(format_stage_table(scores))
            print(f"{embedders[0].name}+{reranker.name}: {seconds:.1f} s, "
                  f"{seconds / len(cases):.2f} s per case")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
