"""What incremental retrieval saves: replay recorded episodes through LineRetriever twice.

For every episode folder under the given run folders, the full AXTree of each step
(from steps.jsonl) is fed to a LineRetriever filter with incremental retrieval on and
then off, with the episode's goal and actions as history. Printed: retriever calls,
retriever prompt tokens, and how much the incremental selection agrees with a fresh
one (Jaccard of kept lines, and the share of the fresh selection it covers).

    python benchmarks/incremental_retrieval.py runs/<timestamp> [--base-url URL --model M]

Without --base-url the embedded model is served (slow on CPU: a few minutes per
thousand-line page). ``--heuristic`` uses a keyword retriever on a local server instead,
which measures the token saving of the mechanism itself, not a model's choices.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import statistics
from pathlib import Path
from typing import Any

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.line_retriever import LineRetrieverConfig, LineRetrieverFilter
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.run import open_models
from linewise.runtime.trace import read_steps, read_summary
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import ScriptedChatServer


def keyword_retriever(messages: list[dict[str, Any]]) -> str:
    """Keeps numbered lines that share a word of 4+ letters with the goal."""
    prompt = messages[-1]["content"]
    goal = prompt.split("# Goal:", 1)[1].split("#", 1)[0].lower()
    words = {w for w in re.findall(r"[a-z]{4,}", goal)}
    keep = [int(m.group(1)) for m in re.finditer(r"^(\d+)\|(.*)$", prompt, re.M)
            if words & set(re.findall(r"[a-z]{4,}", m.group(2).lower()))]
    return "<answer>[" + ", ".join(f"({n}, {n})" for n in keep[:300] or [1]) + "]</answer>"


async def replay(directory: Path, make: Any) -> dict[str, Any]:
    summary = read_summary(directory)
    steps = read_steps(directory)
    results = {}
    for incremental in (True, False):
        flt = make(incremental)
        calls = tokens = 0
        kept: list[set[int]] = []
        history: list[str] = []
        for step in steps:
            lines = [line.split("|", 1)[1] for line in step.axtree.splitlines()]
            result = await flt.apply(FilterInput(goal=summary.goal, lines=lines,
                                                 history=list(history)))
            calls += len(result.calls)
            tokens += sum(c.prompt_tokens for c in result.calls)
            kept.append(set(result.kept_lines))
            history.append(step.action or step.action_raw or "")
        results["on" if incremental else "off"] = {"calls": calls, "tokens": tokens, "kept": kept}
    agreement = [
        len(a & b) / len(a | b) if a | b else 1.0
        for a, b in zip(results["on"]["kept"], results["off"]["kept"], strict=True)
    ]
    coverage = [
        len(a & b) / len(b) if b else 1.0
        for a, b in zip(results["on"]["kept"], results["off"]["kept"], strict=True)
    ]
    return {"episode": directory.name, "steps": len(steps), **{
        f"{k}_{m}": results[k][m] for k in ("on", "off") for m in ("calls", "tokens")},
        "jaccard": statistics.fmean(agreement) if agreement else 1.0,
        "coverage": statistics.fmean(coverage) if coverage else 1.0}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--heuristic", action="store_true")
    args = parser.parse_args()
    episodes = sorted(p.parent for run in args.runs for p in run.glob("*/steps.jsonl"))
    async with contextlib.AsyncExitStack() as stack:
        if args.heuristic:
            server = stack.enter_context(ScriptedChatServer(keyword_retriever))
            client = ChatClient(EndpointSettings(base_url=server.base_url, model="keywords"))
        elif args.base_url:
            client = ChatClient(EndpointSettings(base_url=args.base_url, model=args.model))
        else:
            _, client = await stack.enter_async_context(open_models(LinewiseSettings()))

        def make(incremental: bool) -> LineRetrieverFilter:
            config = LineRetrieverConfig(cost_gate=False, incremental=incremental)
            return LineRetrieverFilter(client, config)

        rows = [await replay(e, make) for e in episodes if read_steps(e)]
    print(f"{'episode':40} {'steps':>5} {'calls on/off':>13} {'tokens on/off':>16} "
          f"{'jaccard':>8} {'coverage':>9}")
    for r in rows:
        calls = f"{r['on_calls']:>6}/{r['off_calls']:<6}"
        tokens = f"{r['on_tokens']:>7}/{r['off_tokens']:<8}"
        print(f"{r['episode'][:40]:40} {r['steps']:>5} {calls} {tokens} "
              f"{r['jaccard']:>8.2f} {r['coverage']:>9.2f}")
    on = sum(r["on_tokens"] for r in rows)
    off = sum(r["off_tokens"] for r in rows)
    if off:
        print(f"\nretriever prompt tokens: {on} incremental vs {off} fresh "
              f"({100 * (1 - on / off):.0f}% saved)")


if __name__ == "__main__":
    asyncio.run(main())
