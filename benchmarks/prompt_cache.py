"""How much of each action prompt llama.cpp's prompt cache reuses, by prompt layout.

Replays the model calls of recorded episodes (retriever and action calls, in the order
they ran) against the embedded model, once per layout of the action prompt, each on a
fresh server, and prints per step the prompt tokens, the tokens the server took from
its cache (``usage.prompt_tokens_details.cached_tokens``) and the time to read the
prompt (the call asks for one token, so its latency is the prefill).

Layouts (the same sections, moved; the recorded prompt is ``recorded``):

- ``recorded``: goal, page (URL, tabs, focused element, tree), history, last error;
- ``history-first``: goal, history, page, last error — the part that only grows
  between steps comes before the part that changes;
- ``state-last``: goal, tree, then the page's state (URL, tabs, focused element),
  history, last error — a click that moves the focus or the URL's fragment leaves the
  tree's prefix intact;
- ``state-last-unflagged``: as ``state-last``, and the tree's lines without the
  ``, focused`` flag (the state section names the focused element).

``--parallel N`` gives the server N slots: with one, every call (the retriever's, the
answer check's) takes the one KV cache, and the next action call may have to read the
system prompt again; with two, llama.cpp sends each request to the slot whose cached
prompt it shares most with, so retriever calls need not evict the action prompt.

``--estimate`` replays nothing: it counts, per action call, the tokens the prompt
shares as a prefix with the most similar earlier action prompt of its episode (what a
prefix cache can reuse at best), with tiktoken's count, in seconds of nothing.

    python benchmarks/prompt_cache.py runs/docs-agent/auto [--layout recorded ...]

The calls are replayed as recorded, whatever the current prompt templates say, so
the comparison holds the content fixed and varies only the order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

import openai

from linewise.runtime.models.local_server import LocalModelServer
from linewise.tokens import get_encoding

HISTORY = re.compile(r"\n# History of your previous steps\n.*?(?=\n# Error from your last|"
                     r"\nAnswer with|\Z)", re.DOTALL)
PAGE = "# Current page\n"


def history_first(user: str) -> str:
    """The recorded action prompt with its history moved before the page."""
    match = HISTORY.search(user)
    if match is None or PAGE not in user:
        return user
    history = match.group(0)
    without = user[: match.start()] + user[match.end():]
    head, _, page = without.partition(PAGE)
    return f"{head}{history.lstrip(chr(10))}\n\n{PAGE}{page}"


STATE = re.compile(r"URL: .*?\n## Accessibility tree\n", re.DOTALL)


def state_last(user: str) -> str:
    """The recorded action prompt with the page's state moved after its tree."""
    match = STATE.search(user)
    history = user.find("\n# History of your previous steps")
    if match is None or history < 0:
        return user
    state = match.group(0).removesuffix("## Accessibility tree\n")
    return (user[: match.start()] + user[match.end(): history] + "\n# Where you are\n"
            + state.rstrip("\n") + "\n" + user[history:])


def state_last_unflagged(user: str) -> str:
    return re.sub(r", focused(?=,|$)", "", state_last(user), flags=re.MULTILINE)


LAYOUTS = {"recorded": lambda text: text, "history-first": history_first,
           "state-last": state_last, "state-last-unflagged": state_last_unflagged}


def shared_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def estimate(folders: list[Path], layout: str) -> list[dict[str, Any]]:
    """Per action call: its tokens and those it shares as a prefix with the closest
    earlier action prompt of the episode (the best a prefix cache can do)."""
    encoder = get_encoding()
    rows = []
    for folder in folders:
        earlier: list[list[int]] = []
        for step, purpose, messages in episode_calls(folder):
            if purpose != "action" or messages[-1]["role"] != "user":
                continue
            system, user = messages[0]["content"], LAYOUTS[layout](messages[-1]["content"])
            tokens = encoder.encode_ordinary(system + user)
            shared = max((shared_prefix(tokens, e) for e in earlier), default=0)
            earlier.append(tokens)
            rows.append({"episode": folder.name, "step": step, "purpose": purpose,
                         "layout": layout, "prompt_tokens": len(tokens),
                         "cached_tokens": shared, "seconds": 0.0})
    return rows


def episode_calls(folder: Path) -> list[tuple[int, str, list[dict[str, Any]]]]:
    """(step, purpose, messages) of every recorded call, in order."""
    calls = []
    for line in (folder / "steps.jsonl").read_text(encoding="utf-8").splitlines():
        step = json.loads(line)
        for call in step["llm_calls"]:
            calls.append((step["index"], call["purpose"], call["messages"]))
    return calls


async def replay(folders: list[Path], layout: str, parallel: int = 1) -> list[dict[str, Any]]:
    rows = []
    async with LocalModelServer(parallel=parallel) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local", timeout=3600)
        for folder in folders:
            for step, purpose, messages in episode_calls(folder):
                if purpose == "action":
                    messages = [*messages[:-1], {**messages[-1], "content": LAYOUTS[layout](
                        messages[-1]["content"])}] if messages[-1]["role"] == "user" else messages
                started = time.perf_counter()
                answer = await client.chat.completions.create(
                    model=server.model_name, messages=messages, max_tokens=1, temperature=0)
                seconds = time.perf_counter() - started
                usage = answer.usage.model_dump() if answer.usage else {}
                details = usage.get("prompt_tokens_details") or {}
                rows.append({"episode": folder.name, "step": step, "purpose": purpose,
                             "layout": layout, "parallel": parallel,
                             "prompt_tokens": usage.get("prompt_tokens", 0),
                             "cached_tokens": details.get("cached_tokens", 0),
                             "seconds": round(seconds, 2)})
                print(json.dumps(rows[-1]), flush=True)
        await client.close()
    return rows


def report(rows: list[dict[str, Any]]) -> None:
    print("\n| layout | action calls | prompt tokens (mean) | cached (mean) | cached share "
          "| read time (median) | read time after step 0 (median) |")
    print("|---|---|---|---|---|---|---|")
    for layout in LAYOUTS:
        action = [r for r in rows if r["layout"] == layout and r["purpose"] == "action"]
        if not action:
            continue
        later = [r["seconds"] for r in action if r["step"] > 0] or [0.0]
        prompt = statistics.mean(r["prompt_tokens"] for r in action)
        cached = statistics.mean(r["cached_tokens"] for r in action)
        print(f"| {layout} | {len(action)} | {prompt:.0f} | {cached:.0f} | "
              f"{cached / max(prompt, 1):.0%} | "
              f"{statistics.median(r['seconds'] for r in action):.1f} s | "
              f"{statistics.median(later):.1f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders or episode folders")
    parser.add_argument("--layout", action="append", choices=sorted(LAYOUTS))
    parser.add_argument("--json", type=Path, help="write every replayed call here")
    parser.add_argument("--parallel", type=int, default=1, help="the server's request slots")
    parser.add_argument("--estimate", action="store_true",
                        help="count shared prefixes instead of replaying (no model)")
    args = parser.parse_args()
    folders = sorted({p.parent for run in args.runs for p in run.rglob("steps.jsonl")})
    rows: list[dict[str, Any]] = []
    for layout in args.layout or list(LAYOUTS):
        rows += estimate(folders, layout) if args.estimate else asyncio.run(
            replay(folders, layout, args.parallel))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    report(rows)


if __name__ == "__main__":
    main()
