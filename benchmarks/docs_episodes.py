"""What an observation filter costs an agent on large pages: the docs episode set.

Runs the 14 tasks of ``tasks/docs-episodes.yaml`` (Debian's Python documentation,
1,600 to 8,200 AXTree lines per page) once per filter and prints, per filter: tasks
solved, steps, the action model's prompt tokens, the observation tokens shown against
the full trees', and the retriever's time.

The action model is scripted and honest about what it sees: it knows, for each goal,
which link leads to the answer (a pattern of the link's name), and acts only on what the
filtered view shows it. When the link is not in the view it says it cannot find it and
answers ``noop()``, as a model would, which is what the filters' escalation reacts to;
when it is shown it clicks it (saying which entry it opens) and then reports the name.
So a filter that hides the needed element costs steps or the task, and the token
figures are those of the real prompts. Retrieval itself is real: ``focus`` runs the
embedded model (or ``--retriever-url``).

    python benchmarks/docs_episodes.py --filter none --filter focus-candidates
    python benchmarks/docs_episodes.py --filter focus --out runs/docs-episodes-focus

Needs: apt-get install python3-doc.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from linewise.agent.models import ChatModel
from linewise.records import EpisodeSummary
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.filter_choice import filter_needs_retriever
from linewise.runtime.run import open_endpoints, run_tasks
from linewise.runtime.tasks.loader import load_task_file
from linewise.runtime.tasks.schema import WebTask
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import ScriptedChatServer, prompt_section

TASKS = Path(__file__).resolve().parent.parent / "tasks" / "docs-episodes.yaml"
DOCS = Path("/usr/share/doc/python3-doc/html/library")

#: For each task: the links to open, in order (patterns of the link's accessible name).
PLANS: dict[str, list[str]] = {
    "shutil-delete-folder": [r"rmtree\(\)"],
    "shutil-find-program": [r"which\(\)"],
    "csv-guess-format": [r"Sniffer"],
    "csv-records-as-mappings": [r"DictReader"],
    "functools-remember-results": [r"lru_cache\(\)"],
    "functools-freeze-arguments": [r"partial\(\)"],
    "collections-both-ends": [r"deque"],
    "collections-tally": [r"Counter"],
    "subprocess-too-slow": [r"TimeoutExpired"],
    "subprocess-capture-printed": [r"check_output\(\)"],
    "logging-one-call-setup": [r"basicConfig\(\)"],
    "sqlite3-record-shape": [r"row_factory"],
    "filesys-delete-folder": [r"shutil — High-level file operations", r"rmtree\(\)"],
    "filesys-free-space": [r"shutil — High-level file operations", r"disk_usage\(\)"],
}
OPENED = re.compile(r"thought: Opening the entry '([^']+)'")


class DocsReader:
    """The scripted action model: follows the task's plan through what the view shows."""

    def __init__(self, plans_by_goal: dict[str, list[str]]) -> None:
        self.plans_by_goal = plans_by_goal

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        prompt = messages[1]["content"]  # later messages are re-asks
        plan = self.plans_by_goal[prompt_section(prompt, "Goal").strip()]
        history = prompt_section(prompt, "History of your previous steps")
        opened = OPENED.findall(history)
        if len(opened) >= len(plan):
            name = opened[-1].removesuffix("()").split(" ")[0]
            return (f"<think>The entry is open; its name is {name}.</think>"
                    f"<action>send_msg_to_user({name!r})</action>")
        pattern = plan[len(opened)]
        tree = prompt_section(prompt, "Current page")
        for line in tree.splitlines():
            link = re.search(rf"\[([A-Za-z0-9]+)\] link '({pattern}[^']*)'", line)
            if link is not None:
                return (f"<think>Opening the entry '{link.group(2)}'.</think>"
                        f"<action>click('{link.group(1)}')</action>")
        return ("<think>I cannot find the entry I need on this page; I need to see more "
                "of it.</think><action>noop()</action>")


def summarize(name: str, summaries: list[EpisodeSummary], seconds: float) -> dict[str, Any]:
    done = [s for s in summaries if s.status == "finished"]
    return {
        "filter": name,
        "tasks": len(summaries),
        "solved": sum(1 for s in done if s.success),
        "steps": sum(s.n_steps for s in summaries),
        "action_prompt_tokens": sum(s.tokens.action_prompt for s in summaries),
        "obs_tokens_shown": sum(s.obs_tokens_shown for s in summaries),
        "obs_tokens_full": sum(s.obs_tokens_full for s in summaries),
        "retriever_tokens": sum(s.tokens.retriever_prompt + s.tokens.retriever_completion
                                for s in summaries),
        "failed": [s.task_id for s in summaries if not s.success],
        "wall_s": round(seconds, 1),
    }


async def run_filter(name: str, out: Path, retriever_url: str | None) -> dict[str, Any]:
    tasks = [t for t in load_task_file(TASKS) if isinstance(t, WebTask)]
    plans_by_goal = {t.goal: PLANS[t.id] for t in tasks}
    async with contextlib.AsyncExitStack() as stack:
        llm = stack.enter_context(ScriptedChatServer(DocsReader(plans_by_goal)))
        action = EndpointSettings(base_url=llm.base_url, model=llm.model)
        retriever = EndpointSettings(base_url=retriever_url, model="retriever") \
            if retriever_url else EndpointSettings()
        settings = LinewiseSettings(action=action, retriever=retriever, screenshots=False)
        embedded: ChatModel | None = None
        if retriever_url is None and filter_needs_retriever(name):
            _, embedded = await stack.enter_async_context(
                open_endpoints(LinewiseSettings(), action=False, retriever=True))
        started = time.monotonic()
        summaries = await run_tasks(tasks, settings.resolved().with_filter(name), out / name,
                                    browser_config=BrowserConfig(headless=True),
                                    retriever_model=embedded)
    return summarize(name, summaries, time.monotonic() - started)


def print_table(rows: list[dict[str, Any]]) -> None:
    print("| filter | solved | steps | action prompt tokens | observation tokens shown / full "
          "(cut) | retriever tokens | wall |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        cut = 1 - row["obs_tokens_shown"] / max(row["obs_tokens_full"], 1)
        print(f"| {row['filter']} | {row['solved']}/{row['tasks']} | {row['steps']} | "
              f"{row['action_prompt_tokens']:,} | {row['obs_tokens_shown']:,} / "
              f"{row['obs_tokens_full']:,} ({cut:.0%}) | {row['retriever_tokens']:,} | "
              f"{row['wall_s']:.0f} s |")
    for row in rows:
        if row["failed"]:
            print(f"{row['filter']}: not solved: {', '.join(row['failed'])}")


async def main_async(args: argparse.Namespace) -> None:
    rows = []
    for name in args.filter or ["none", "focus-candidates"]:
        row = await run_filter(name, args.out, args.retriever_url)
        rows.append(row)
        with (args.out / "results.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
    print_table(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", action="append", help="a registered filter (repeatable)")
    parser.add_argument("--out", type=Path, default=Path("runs/docs-episodes"))
    parser.add_argument("--retriever-url", help="an OpenAI-compatible retriever endpoint "
                        "(default: the embedded model, for filters that need one)")
    args = parser.parse_args()
    if not (DOCS / "shutil.html").exists():
        sys.exit(f"{DOCS} is missing: apt-get install python3-doc")
    args.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
