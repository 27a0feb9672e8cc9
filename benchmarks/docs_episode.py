"""Record a long episode on large documentation pages, for replay benchmarks.

MiniWoB++ pages are 20-30 lines and change wholesale between steps; incremental
retrieval matters on long pages where most lines survive a step. This script records a
12-step episode on Debian's python3-doc pages (``library/functions.html``, about 7,700
lines, then ``library/stdtypes.html``) with a scripted action model that reads each
prompt and follows a fixed plan: search, in-page links, scrolling, hovering, a move to
another page and back. No LLM runs; the trace is real (real Chromium, real AXTrees).

    python benchmarks/docs_episode.py --out runs/docs-episode
    python benchmarks/incremental_retrieval.py runs/docs-episode --heuristic

Needs: apt-get install python3-doc.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path
from typing import Any

from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.run import run_tasks
from linewise.runtime.tasks.loader import adhoc_task
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import ScriptedChatServer, StaticServer

DOCS = Path("/usr/share/doc/python3-doc/html")
GOAL = (
    "In the Python documentation, find how sorted() and list.sort() differ, look at "
    "zip() and enumerate() on the way, and tell me the answer."
)

#: (action template, pattern of the element's line); {bid} is filled from the prompt.
PLAN: list[tuple[str, str | None]] = [
    ("fill('{bid}', 'sorted')", r"(searchbox|textbox) 'Quick search'"),
    ("click('{bid}')", r"link 'sorted\(\)'"),
    ("scroll(0, 600)", None),
    ("hover('{bid}')", r"link 'zip\(\)'"),
    ("click('{bid}')", r"link 'zip\(\)'"),
    ("scroll(0, -300)", None),
    ("click('{bid}')", r"link 'enumerate\(\)'"),
    ("click('{bid}')", r"link 'list'"),
    ("scroll(0, 800)", None),
    ("go_back()", None),
    ("scroll(0, 400)", None),
    ("send_msg_to_user('sorted() returns a new list; list.sort() sorts in place.')", None),
]


def _steps_taken(prompt: str) -> int:
    history = prompt.split("# History of your previous steps", 1)[-1]
    return len(re.findall(r"^Step \d+:$", history, re.MULTILINE))


def follow_plan(messages: list[dict[str, Any]]) -> str:
    prompt = messages[-1]["content"]
    step = min(_steps_taken(prompt), len(PLAN) - 1)
    template, pattern = PLAN[step]
    if pattern is None:
        return f"<think>Step {step + 1} of the plan.</think><action>{template}</action>"
    for line in prompt.splitlines():
        if re.search(pattern, line) and (found := re.search(r"\[([A-Za-z0-9]+)\]", line)):
            action = template.format(bid=found.group(1))
            return f"<think>Step {step + 1} of the plan.</think><action>{action}</action>"
    return f"<think>Step {step + 1}: nothing matches {pattern}.</think><action>noop()</action>"


async def record(out: Path) -> None:
    if not (DOCS / "library" / "functions.html").exists():
        sys.exit(f"{DOCS} is missing: apt-get install python3-doc")
    with StaticServer(DOCS.resolve()) as docs, ScriptedChatServer(follow_plan) as llm:
        endpoint = EndpointSettings(base_url=llm.base_url, model=llm.model)
        settings = LinewiseSettings(action=endpoint, retriever=endpoint, screenshots=False)
        task = adhoc_task(docs.url("library/functions.html"), GOAL, max_steps=len(PLAN))
        summaries = await run_tasks([task], settings.resolved(), out,
                                    browser_config=BrowserConfig(headless=True))
    summary = summaries[0]
    print(f"{out}: {summary.n_steps} steps, termination {summary.termination}, "
          f"{summary.obs_tokens_full} observation tokens in all")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/docs-episode"))
    asyncio.run(record(parser.parse_args().out))


if __name__ == "__main__":
    main()
