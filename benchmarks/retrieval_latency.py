"""How long one step of an observation filter takes on large pages, first and next steps.

For each filter (``--filter``, repeatable) and each of three pages — Python's
``library/os.path.html`` (a ``large.python3-doc.os-path`` filter case), the built-in
functions page (``tests/data/trees/docs-functions.txt``) and ``library/stdtypes.html``
(``large.python3-doc.stdtypes.1``, 20,324 lines) — one fresh filter runs three steps
as an episode would:

1. **first**: the page, no history;
2. **little changed**: the agent clicked an element the first view showed; that line is
   now focused, one line was inserted near the top of the page, and the history has the
   click;
3. **unchanged**: the same page again, one more (non-stuck) action in the history.

Printed: a markdown table of each step's seconds and retriever calls, and the machine's
load average before and after. The whole tree's token count is given to the filter, as
the step loop gives it (it counts it once per step for every filter).

The retriever of model-based filters is an instant scripted model by default (it keeps
the first line it is shown), so the figures are the filter's own work; ``--embedded``
serves the embedded model instead (minutes per model call on a small CPU).

    python benchmarks/retrieval_latency.py
    python benchmarks/retrieval_latency.py --filter focus-items --repeat 3
    python benchmarks/retrieval_latency.py --filter focus-items --embedded
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.agent.filters.registry import get_filter
from linewise.agent.models import ChatModel
from linewise.agent.profile import profile_of
from linewise.runtime.filter_choice import build_filter_maker
from linewise.runtime.run import open_endpoints
from linewise.settings import LinewiseSettings
from linewise.testing import CallInfo, FunctionModel
from linewise.tokens import count_tokens

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "tasks" / "filter-cases"
DEFAULT_FILTERS = ["focus-candidates", "focus-candidates-items", "focus-items", "focus-outline"]


@dataclass
class Page:
    name: str
    goal: str
    lines: list[str]


def load_pages() -> list[Page]:
    os_path = json.loads(sorted(CASES.glob("large.python3-doc.os-path.*.json"))[0].read_text())
    stdtypes = json.loads((CASES / "large.python3-doc.stdtypes.1.json").read_text())
    functions = (REPO / "tests" / "data" / "trees" / "docs-functions.txt").read_text()
    return [
        Page("os-path", os_path["goal"], os_path["lines"]),
        Page("functions", "Which built-in turns an iterable into pairs with their position?",
             functions.split("\n")),
        Page("stdtypes", stdtypes["goal"], stdtypes["lines"]),
    ]


def first_shown_line(messages: list[dict[str, Any]], info: CallInfo) -> str:
    """An instant retriever: it keeps the first line it is shown."""
    first = re.search(r"^(\d+)\|", messages[-1]["content"], re.M)
    number = first.group(1) if first else "1"
    return f'{{"think": "the first line", "ranges": [[{number}, {number}]]}}'


def after_a_click(lines: list[str], view: FilterResult) -> tuple[list[str], str]:
    """The page after clicking an element the view showed (the middle one of its bids):
    that line gains ``focused`` and one line appears near the top. Returns the new
    lines and the clicked bid."""
    bids = view.shown_bids or [""]
    bid = bids[len(bids) // 2]
    changed = list(lines)
    index = next((i for i, line in enumerate(lines) if line.lstrip("\t").startswith(f"[{bid}] ")),
                 None)
    if index is not None:
        changed[index] = changed[index] + ", focused"
    changed.insert(min(5, len(changed)), "\tStaticText 'Link copied to the clipboard'")
    return changed, bid


async def timed(flt: Any, observation: FilterInput) -> tuple[float, FilterResult]:
    started = time.perf_counter()
    result = await flt.apply(observation)
    return time.perf_counter() - started, result


async def measure(name: str, page: Page, settings: LinewiseSettings,
                  model: ChatModel) -> dict[str, Any]:
    retriever = model if get_filter(name).needs_retriever else None
    flt = build_filter_maker(settings, name, retriever=retriever,
                             retriever_profile=profile_of(model))()
    full = count_tokens("\n".join(page.lines))
    first_s, first = await timed(flt, FilterInput(goal=page.goal, lines=page.lines,
                                                   tokens_full=full))
    lines, bid = after_a_click(page.lines, first)
    history = [f"click('{bid}')"]
    changed_full = count_tokens("\n".join(lines))
    little_s, little = await timed(flt, FilterInput(
        goal=page.goal, lines=lines, history=history, focused_bid=bid, tokens_full=changed_full,
    ))
    same_s, same = await timed(flt, FilterInput(
        goal=page.goal, lines=lines, history=[*history, "scroll(0, 200)"], focused_bid=bid,
        tokens_full=changed_full,
    ))
    return {
        "seconds": (first_s, little_s, same_s),
        "calls": tuple(len(r.calls) for r in (first, little, same)),
        "incremental": (little.notes.get("incremental"), same.notes.get("incremental")),
    }


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


async def run(args: argparse.Namespace) -> None:
    settings = LinewiseSettings()
    pages = load_pages()
    print(f"load average before: {load_average()}")
    rows: list[str] = []
    async with open_endpoints(settings, action=False, retriever=args.embedded) as (_, served):
        model: ChatModel = served if args.embedded and served is not None else FunctionModel(
            first_shown_line)
        for page in pages:
            for name in args.filters:
                runs = [await measure(name, page, settings, model)
                        for _ in range(args.repeat)]
                seconds = [statistics.median(r["seconds"][k] for r in runs) for k in range(3)]
                calls = runs[0]["calls"]
                rows.append(
                    f"| {page.name} | {len(page.lines):,} | {name} | {seconds[0]:.2f} | "
                    f"{seconds[1]:.2f} | {seconds[2]:.2f} | {calls[0]} / {calls[1]} / {calls[2]} |"
                )
                print(f"  {page.name} {name}: {seconds} calls {calls} "
                      f"notes {runs[0]['incremental']}", flush=True)
    print(f"load average after: {load_average()}")
    print()
    print("| page | lines | filter | first (s) | little changed (s) | unchanged (s) "
          "| model calls (first / little / unchanged) |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--filter", dest="filters", action="append",
                        help="a filter to measure (repeatable; default: "
                        f"{', '.join(DEFAULT_FILTERS)})")
    parser.add_argument("--repeat", type=int, default=1,
                        help="episodes per page and filter; the median of each step is printed")
    parser.add_argument("--embedded", action="store_true",
                        help="serve the embedded model as the retriever (slow on a small CPU)")
    args = parser.parse_args()
    args.filters = args.filters or DEFAULT_FILTERS
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
