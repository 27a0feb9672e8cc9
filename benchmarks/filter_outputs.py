"""Every registered filter's output on every filter case, as JSON: a behaviour golden.

    python benchmarks/filter_outputs.py --out before.json
    (restructure)
    python benchmarks/filter_outputs.py --out after.json
    diff before.json after.json

Each filter (hidden research variants included) is made fresh for each case of
``tasks/filter-cases/`` with the default filter settings and applied once; the file
keeps, per filter and case, the view text's SHA-256 (``--text`` keeps the text), its
kept and context lines, the tokens shown and the fallback reason. Filters that ask a
retriever get a scripted one (``linewise.testing.FunctionModel``): fixed terms for a
query expansion, fixed line ranges for any other question. Filters that embed get the
shipped offline MiniLM embedder, each text's vector memoised (``--vectors FILE`` keeps
the vectors between runs, so a second run need not embed again).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.registry import (
    FilterContext,
    filter_maker,
    filter_names,
    shared_embedder,
)
from linewise.apps.filter_eval import load_cases
from linewise.settings import FilterSettings
from linewise.testing import FunctionModel
from linewise.testing.function_model import CallInfo

CASES = Path(__file__).resolve().parent.parent / "tasks" / "filter-cases"

TERMS_ANSWER = json.dumps({"terms": ["search", "submit", "next", "function", "example"]})
RANGES_ANSWER = json.dumps({"think": "scripted", "ranges": [[1, 6], [20, 40], [120, 125]]})


def _answer(messages: list[dict[str, Any]], info: CallInfo) -> str:
    """Terms when the call asks for terms (its schema or its prompt), else line ranges."""
    response_format = json.dumps(info.params.get("response_format") or {})
    prompt = " ".join(str(m.get("content", "")) for m in messages)
    if '"terms"' in response_format or ("terms" in prompt and "ranges" not in prompt):
        return TERMS_ANSWER
    return RANGES_ANSWER


class MemoEmbedder:
    """The offline MiniLM embedder, each text's vector kept after its first embedding."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.inner = shared_embedder(FilterSettings())()  # the offline MiniLM
        self.name = self.inner.name
        self.vectors = vectors

    async def embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            found = np.asarray(await self.inner.embed(missing), dtype=np.float32)
            self.vectors.update(zip(missing, found, strict=True))
        return np.stack([self.vectors[t] for t in texts])


async def outputs(filters: list[str], vectors: dict[str, np.ndarray],
                  skip_cases: tuple[str, ...] = ()) -> dict[str, Any]:
    cases = [c for c in load_cases(CASES) if not c.id.startswith(skip_cases)]
    embedder = MemoEmbedder(vectors)
    found: dict[str, Any] = {}
    for name in filters:
        started = time.perf_counter()
        context = FilterContext(
            settings=FilterSettings(name=name),
            retriever=FunctionModel(_answer, model="scripted"),
            embedder=lambda: embedder,  # type: ignore[return-value]
        )
        make = filter_maker(context)
        per_case: dict[str, Any] = {}
        for case in cases:
            result = await make().apply(FilterInput(
                goal=case.goal, lines=case.lines, history=case.history,
                focused_bid=case.focused_bid))
            per_case[case.id] = {
                "text": result.text,
                "kept_lines": result.kept_lines,
                "context_lines": result.context_lines,
                "tokens_shown": result.tokens_shown,
                "fallback_reason": result.fallback_reason,
            }
        found[name] = per_case
        print(f"{name}: {len(cases)} cases, {time.perf_counter() - started:.1f}s",
              file=sys.stderr, flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--filter", action="append", dest="filters",
                        help="only this filter (repeatable); default every registered one")
    parser.add_argument("--skip", action="append", default=[],
                        help="leave this filter out (repeatable)")
    parser.add_argument("--skip-cases", action="append", default=[], metavar="PREFIX",
                        help="leave out the cases whose id starts with PREFIX (repeatable)")
    parser.add_argument("--text", action="store_true", help="keep the view texts")
    parser.add_argument("--vectors", type=Path, help="a pickle of the memoised vectors, "
                        "read when it exists and written after the run")
    args = parser.parse_args()
    vectors: dict[str, np.ndarray] = {}
    if args.vectors is not None and args.vectors.exists():
        vectors = pickle.loads(args.vectors.read_bytes())
    filters = [f for f in args.filters or filter_names(include_hidden=True, entry_points=False)
               if f not in args.skip]
    found = asyncio.run(outputs(filters, vectors, tuple(args.skip_cases)))
    if not args.text:
        for per_case in found.values():
            for entry in per_case.values():
                entry["text"] = hashlib.sha256(entry.pop("text").encode()).hexdigest()
    args.out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    if args.vectors is not None:
        args.vectors.write_bytes(pickle.dumps(vectors))


if __name__ == "__main__":
    main()
