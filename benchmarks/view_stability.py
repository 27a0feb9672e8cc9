"""How much of each step's view a prefix cache could reuse: the default filter replayed
over recorded episodes, without the action model.

llama.cpp reuses the previous prompt up to its first differing token, so on a page the
model has already read a step costs seconds when the view's text starts the same, and
a minute when it changes near the top. This replays ``auto`` (with the embedded model's
view budget) over the steps of recorded episodes — each step's page, history, focus and
the query-expansion terms the retriever gave then — and counts, per step, the view's
tokens and those it shares as a prefix with the closest earlier view of its episode.

Run it with the code to compare on the path (e.g. a worktree of an older commit):

    python benchmarks/view_stability.py runs/docs-agent/auto [--view-budget 3000]
    PYTHONPATH=/path/to/old/checkout python /path/to/old/checkout/benchmarks/view_stability.py ...

The figures are an estimate: the recorded history is replayed as it was, so a step
whose view would have differed cannot change what the agent did next.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from pathlib import Path
from typing import Any

from prompt_cache import shared_prefix

from linewise.agent.filters.base import FilterInput
from linewise.agent.history import PastStep
from linewise.runtime.filter_choice import build_filter_maker
from linewise.runtime.models.profiles import resolve_profile
from linewise.settings import LinewiseSettings
from linewise.testing import CallInfo, FunctionModel
from linewise.tokens import get_encoding

RECALL_HISTORY = 3
"""The last actions whose elements the recall guard keeps (as the episode does)."""


def _lines(numbered: str) -> list[str]:
    return [line.partition("|")[2] for line in numbered.split("\n")]


def _terms(step: dict[str, Any]) -> list[str]:
    notes = (step.get("filter_result") or {}).get("notes") or {}
    return list((notes.get("expansion") or {}).get("terms") or [])



async def replay(folder: Path, settings: LinewiseSettings) -> list[dict[str, Any]]:
    steps = [json.loads(line) for line in
             (folder / "steps.jsonl").read_text(encoding="utf-8").splitlines()]
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    current: dict[str, list[str]] = {"terms": []}

    def retriever(_messages: list[dict[str, Any]], _info: CallInfo) -> str:
        return json.dumps({"terms": current["terms"]})

    embedded = resolve_profile(settings.action.model_copy(update={"profile": "embedded"}),
                               local=settings.local)
    make = build_filter_maker(settings, "auto", retriever=FunctionModel(retriever),
                              action_profile=embedded, retriever_profile=embedded)
    view_filter = make()
    encoder = get_encoding()
    earlier: list[list[int]] = []
    rows = []
    for index, step in enumerate(steps):
        if not step.get("axtree"):
            continue
        history = steps[:index]
        current["terms"] = _terms(step)
        parsed = [PastStep.of_text(s.get("action") or "", s.get("action_error"))
                  for s in history]
        must_keep = [bid for past in parsed[-RECALL_HISTORY:] for bid in past.bids]
        result = await view_filter.apply(FilterInput(
            goal=summary.get("goal") or "", lines=_lines(step["axtree"]), history=parsed,
            thoughts=[s.get("think") or "" for s in history],
            focused_bid=step.get("focused_bid"), last_action_error=step.get("last_action_error"),
            must_keep_bids=list(dict.fromkeys(must_keep))))
        tokens = encoder.encode_ordinary(result.text)
        shared = max((shared_prefix(tokens, e) for e in earlier), default=0)
        earlier.append(tokens)
        rows.append({"episode": folder.name, "step": step["index"], "view": len(tokens),
                     "shared": shared, "new": len(tokens) - shared})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders or episode folders")
    parser.add_argument("--view-budget", type=int, default=3000)
    parser.add_argument("--json", type=Path, help="write every step's row here")
    args = parser.parse_args()
    settings = LinewiseSettings.model_validate(
        {"agent": {"view_budget_tokens": args.view_budget}})
    folders = sorted({p.parent for run in args.runs for p in run.rglob("steps.jsonl")})
    rows: list[dict[str, Any]] = []
    for folder in folders:
        rows += asyncio.run(replay(folder, settings))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    later = [r for r in rows if r["step"] > 0]
    reused = sum(1 for r in later if r["new"] <= 0.05 * r["view"])
    print(f"steps {len(rows)}; after step 0: {len(later)}, of which {reused} reuse at least "
          f"95% of their view")
    if later:
        print(f"new view tokens per step after step 0: median "
              f"{statistics.median(r['new'] for r in later):.0f}, mean "
              f"{statistics.mean(r['new'] for r in later):.0f} (views: median "
              f"{statistics.median(r['view'] for r in later):.0f})")


if __name__ == "__main__":
    main()
