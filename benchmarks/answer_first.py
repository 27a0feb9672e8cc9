"""Does the action model act when its first view already holds what the goal asks for?

For the documentation tasks of ``tasks/docs-agent.yaml`` (see ``docs_agent.py``), each
episode is run for its first step only, with the default filter, in real Chromium. The
action model's call is asked in several *ways* on the same prompt, and each way's
answer is scored against the task:

- an answer task is answered when the action is ``send_msg_to_user`` with text holding
  the task's ``answer_contains``;
- a navigation task is answered when the action clicks a link of the view to the entry
  (the oracle's link pattern).

The oracle's patterns also say whether the view held what the task needs, so the table
separates "the view had it and the model used it" from the filter's misses. Ways:

- ``prompt``: the action prompt as linewise builds it (the one the episode runs on);
- ``reminder``: the same, with one closing instruction after the history, so the page's
  prefix stays in llama.cpp's cache: act now on what the page already shows;
- ``qa``: the model is asked, after the action prompt (so its prefix is cached), whether
  the view shows the answer to what the goal asks, as JSON under a schema; when it says
  it does, the action is ``send_msg_to_user`` with that answer, else ``prompt``'s;
- ``check``: after the ``prompt`` answer, when it is neither ``send_msg_to_user`` nor a
  link click, the model is asked once more in the same conversation whether the view
  already shows what the goal asks for, and to give the action that uses it (same
  grammar).

Each way after the first reuses the first call's cached prompt, so it costs the new
tokens only. Needs the embedded model (or ``--endpoint``), python3-doc, apache2-doc and
valgrind.

    python benchmarks/answer_first.py --json /work/runs/answer_first.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs_agent import ORACLE, Answer, load_tasks, matching_lines, select_tasks, serve_docs

from linewise.agent.action_parser import ParsedAction
from linewise.agent.constraint import Constraint
from linewise.agent.models import ChatModel, Completion
from linewise.agent.profile import profile_of
from linewise.agent.response import parse_answer
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.log import configure_logging
from linewise.runtime.run import open_endpoints, run_tasks
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import prompt_section

REMINDER = (
    "\nBefore you answer: if the accessibility tree above already shows what the goal "
    "asks for, act on it in this step. When the goal asks you to tell something, send "
    "it with send_msg_to_user(...). When it asks you to open something, click the link "
    "that opens it."
)
QUESTION = (
    "Does the accessibility tree above show the answer to what the goal asks? Reply "
    "with JSON only: found (true or false) and answer (the answer in the page's own "
    "words, or an empty string)."
)
QUESTION_SCHEMA = {
    "type": "object",
    "properties": {"found": {"type": "boolean"}, "answer": {"type": "string"}},
    "required": ["found", "answer"],
}
CHECK = (
    "Check your action against the goal. Does the accessibility tree above already show "
    "what the goal asks for? If it does, give the action that uses it now: "
    "send_msg_to_user(...) with the answer, or a click on the link that opens it. If it "
    "does not, give your action again. Answer with <think>…</think> and then one "
    "<action>…</action>."
)


WAYS = frozenset({"reminder", "check", "qa"})


class WaysModel:
    """The action model, asked each way on every call; the episode gets ``prompt``'s."""

    def __init__(self, inner: ChatModel, ways: frozenset[str] = WAYS) -> None:
        self.inner = inner
        self.ways = ways
        self.model = inner.model
        self.profile = profile_of(inner)
        self.asked: list[dict[str, Any]] = []

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Completion:
        first = await self.inner.complete(messages, **params)
        answers = {"prompt": first.text}
        last = messages[-1]
        if "reminder" in self.ways:
            reminded = [*messages[:-1], {**last, "content": last["content"] + REMINDER}]
            answers["reminder"] = (await self.inner.complete(reminded, **params)).text
        action = parse_answer(first.text).action
        if "check" in self.ways:
            answers["check"] = first.text
            if action is None or action.name not in {"send_msg_to_user", "click"}:
                checked = [*messages, {"role": "assistant", "content": first.text},
                           {"role": "user", "content": CHECK}]
                answers["check"] = (await self.inner.complete(checked, **params)).text
        if "qa" in self.ways:
            answers["qa"] = await self._qa(messages, first.text)
        self.asked.append({"prompt": messages[1]["content"], "answers": answers})
        return first

    async def _qa(self, messages: list[dict[str, Any]], fallback: str) -> str:
        asked = [*messages, {"role": "user", "content": QUESTION}]
        reply = await self.inner.complete(asked, temperature=0, **self.profile.request_params(
            Constraint.json_schema("answer", QUESTION_SCHEMA)))
        try:
            found = json.loads(reply.text)
        except ValueError:
            found = {}
        if found.get("found") and str(found.get("answer", "")).strip():
            return (f"<think>The page answers it.</think><action>send_msg_to_user("
                    f"{str(found['answer']).strip()!r})</action>")
        return fallback


def score(task_id: str, expected: str | None, prompt: str, text: str) -> dict[str, Any]:
    """What one answer did: its action, whether it answered, whether the view had it."""
    spec = ORACLE[task_id]
    lines = [line.replace("\\xa0", " ")
             for line in prompt_section(prompt, "Current page").splitlines()]
    action: ParsedAction | None = parse_answer(text).action
    if isinstance(spec, Answer):
        shown = all(matching_lines(lines, pattern) for pattern in spec.lines)
        said = str(action.arguments.get("text", "")) if action is not None else ""
        answered = (action is not None and action.name == "send_msg_to_user"
                    and expected is not None and expected.lower() in said.lower())
    else:
        links = {m.group(1) for line in lines if (m := re.search(spec.link, line))}
        shown = bool(links)
        answered = (action is not None and action.name == "click"
                    and action.arguments.get("bid") in links)
    return {"action": str(action) if action else None, "answered": answered,
            "shown": shown, "kind": "answer" if isinstance(spec, Answer) else "navigate"}


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    settings = LinewiseSettings(screenshots=False)
    if args.endpoint:
        settings = settings.model_copy(update={"action": EndpointSettings(
            base_url=args.endpoint, model=args.model)})
    rows: list[dict[str, Any]] = []
    with serve_docs(args.port) as base_url, tempfile.TemporaryDirectory() as out:
        tasks = select_tasks(load_tasks(base_url), args.only, args.limit)
        tasks = [t.model_copy(update={"max_steps": 1}) for t in tasks]
        async with open_endpoints(settings, action=True, retriever=True) as (action, retriever):
            assert action is not None
            for task in tasks:
                ways = WaysModel(action, frozenset(args.ways or WAYS))
                await run_tasks([task], settings, Path(out) / task.id,
                                browser_config=BrowserConfig(headless=True),
                                action_model=ways, retriever_model=retriever)
                if not ways.asked:
                    print(f"{task.id}: no action call", file=sys.stderr)
                    continue
                asked = ways.asked[0]
                expected = task.success.answer_contains if task.success else None
                row = {"task": task.id, **{
                    way: score(task.id, expected, asked["prompt"], text)
                    for way, text in asked["answers"].items()}}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    ways = [w for w in ("prompt", "reminder", "check", "qa") if rows and w in rows[0]]
    out = ["| way | answered (all) | answer tasks | navigation tasks "
           "| answered when the view had it |", "|---|---|---|---|---|"]
    for way in ways:
        answered = [r for r in rows if r[way]["answered"]]
        kinds = {k: [r for r in rows if r[way]["kind"] == k] for k in ("answer", "navigate")}
        shown = [r for r in rows if r[way]["shown"]]
        out.append(
            f"| {way} | {len(answered)}/{len(rows)} | "
            + " | ".join(f"{sum(r[way]['answered'] for r in kinds[k])}/{len(kinds[k])}"
                         for k in ("answer", "navigate"))
            + f" | {sum(r[way]['answered'] for r in shown)}/{len(shown)} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", help="an OpenAI-compatible action endpoint")
    parser.add_argument("--model", help="the endpoint's model")
    parser.add_argument("--only", action="append", metavar="ID", help="run this task")
    parser.add_argument("--limit", type=int, help="run the first N (selected) tasks")
    parser.add_argument("--json", type=Path, help="write every task's answers here")
    parser.add_argument("--way", dest="ways", action="append", choices=sorted(WAYS),
                        help="ask this way besides the prompt's (repeatable; default all)")
    parser.add_argument("--port", type=int, default=8771)
    args = parser.parse_args()
    configure_logging(json_lines=False, level="WARNING")
    rows = asyncio.run(main_async(args))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(table(rows))


if __name__ == "__main__":
    main()
