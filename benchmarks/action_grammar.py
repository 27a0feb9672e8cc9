"""Decoding with and without the action grammar, on the embedded model.

For each saved AXTree in ``tests/data/trees`` (MiniWoB and documentation pages) and a
goal per tree, asks the embedded model for an action in three ways, each ``--repeats``
times on one server: free (today's prompt, no grammar), under the grammar with the
thought bounded to ``THOUGHT_CHARS`` characters, and under the grammar with an unbounded
thought. Prints, per way: answers that parse to a valid action, answers naming an id
that is not on the page, completion tokens, and decoding speed (llama.cpp's own
``timings.predicted_per_second``) and prompt time.

    python benchmarks/action_grammar.py [--repeats 2] [--ways free,bounded,unbounded]

Documentation trees are cut to the embedded model's view budget (3,000 tokens). Run on
an idle machine: both cores decode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from pathlib import Path
from typing import Any

import openai

from linewise.agent.action_grammar import action_grammar
from linewise.agent.prompt import PageView, build_action_messages
from linewise.agent.response import parse_answer
from linewise.axtree import bids_in, element_lines
from linewise.runtime.models.local_server import LocalModelServer
from linewise.tokens import count_tokens

TREES = Path(__file__).resolve().parent.parent / "tests" / "data" / "trees"

GOALS = {
    "miniwob-book-flight.txt": "Book the shortest one-way flight from: LEB to: RDG on 10/14/2016.",
    "miniwob-click-checkboxes.txt": "Select nothing but the checkboxes that are ticked for "
    "the words in the list, and submit.",
    "miniwob-email-inbox.txt": "Find the email by Ignacio and forward that email to Kerry.",
    "miniwob-social-media.txt": "For the user @jessica, click on the 'Retweet' button.",
    "docs-functions.txt": "Which built-in function gives the integer code of a character?"
    " Tell the user.",
    "docs-json.txt": "How do I make json.dumps sort the keys of a dictionary? Tell the user.",
}


VIEW_TOKENS = 3000
"""The embedded model's default view budget: documentation trees are cut to it, as the
``auto`` filter would show them (here simply their first lines)."""


def within_tokens(text: str, budget: int) -> str:
    lines: list[str] = []
    for line in text.splitlines():
        if count_tokens("\n".join([*lines, line])) > budget:
            break
        lines.append(line)
    return "\n".join(lines)


async def ask(client: openai.AsyncOpenAI, messages: list[dict[str, Any]],
              grammar: str | None) -> dict[str, Any]:
    extra = {"grammar": grammar} if grammar is not None else {}
    raw = await client.chat.completions.with_raw_response.create(
        model="local", messages=messages, temperature=0, max_tokens=512,  # type: ignore[arg-type]
        extra_body=extra)
    return dict(json.loads(raw.text))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--ways", default="free,bounded,unbounded")
    parser.add_argument("--json", type=Path, help="write every answer here")
    args = parser.parse_args()
    ways = args.ways.split(",")
    rows: dict[str, list[dict[str, Any]]] = {way: [] for way in ways}
    async with LocalModelServer() as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local", timeout=900)
        for name, goal in GOALS.items():
            text = within_tokens((TREES / name).read_text(encoding="utf-8"), VIEW_TOKENS)
            bids = bids_in(text)
            elements = element_lines(text.split("\n"), bids)
            view = PageView(url="http://127.0.0.1/", text=text)
            messages = build_action_messages(goal, view, [], None)
            for way in ways:
                grammar = None if way == "free" else action_grammar(
                    elements, None, thought_chars=600 if way == "bounded" else 0)
                for _ in range(args.repeats):
                    reply = await ask(client, messages, grammar)
                    answer_text = reply["choices"][0]["message"]["content"] or ""
                    answer = parse_answer(answer_text)
                    timings = reply.get("timings", {})
                    unknown = bool(answer.action) and any(
                        b not in bids for b in answer.action.bids)  # type: ignore[union-attr]
                    rows[way].append({
                        "tree": name, "answer": answer_text, "valid": answer.action is not None,
                        "unknown_id": unknown,
                        "tokens": reply["usage"]["completion_tokens"],
                        "decode_tps": timings.get("predicted_per_second", 0.0),
                        "prompt_ms": timings.get("prompt_ms", 0.0),
                    })
                    print(f"{way:9} {name:32} valid={answer.action is not None!s:5} "
                          f"tok={rows[way][-1]['tokens']:4} "
                          f"{rows[way][-1]['decode_tps']:.1f} tok/s  {answer_text[-90:]!r}",
                          flush=True)
    print("\n| way | valid | unknown id | completion tokens (median) | decode tok/s (median) |")
    print("|---|---|---|---|---|")
    for way, found in rows.items():
        print(f"| {way} | {sum(r['valid'] for r in found)}/{len(found)} | "
              f"{sum(r['unknown_id'] for r in found)} | "
              f"{statistics.median(r['tokens'] for r in found):.0f} | "
              f"{statistics.median(r['decode_tps'] for r in found):.1f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main())
