"""Answering from the model's own reasoning, when the goal asks a question.

A small model may state the answer in its reasoning and then act as if it had not.
Asking it again about the whole page does not help; asking it about its own few
sentences does, because that is a short reading task (docs/design.md, "Answering from
the reasoning").

When the goal asks a question (:func:`asks_a_question`) and the step's action does not
answer (it acts, or gives up with ``report_infeasible``), :func:`answer_from_reasoning`
asks the model, in a short separate conversation under a JSON schema, whether its
reasoning states the answer. An answer is taken only when its words are on the page the
model was shown (:func:`grounded`): the reasoning of a small model also holds what it
believes rather than what it read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from linewise.agent.models import ChatModel
from linewise.agent.structured import Constraint, ask_structured
from linewise.errors import ResponseFormatError
from linewise.prompts import render_prompt
from linewise.records import LLMCall

AnswerCheckMode = Literal["auto", "on", "off"]
"""For goals that ask a question: ``auto``, with the models whose profile asks for it
(``ModelProfile.answer_check``: the small ones that need it); ``on``, with any model;
``off``: never."""


_QUESTION = re.compile(
    r"\?|\b(tell me|tell the user|answer the user|let me know|report back|find out)\b"
    r"|^\s*((in|on|at|for|to|by|from|with|since|under|after|before)\s+)?"
    r"(what|which|who|whom|whose|when|where|why|how|is|are|was|were|does|do|did|"
    r"can|could|should|has|have)\b",
    re.IGNORECASE,
)
_TELL = re.compile(r"\b(tell|answer|say|report|let me know|name)\b", re.IGNORECASE)
_DO = re.compile(
    r"(^|[.?!;:]\s+|\band\s+|\bthen\s+)(open|click|go|navigate|visit|fill|enter|type|"
    r"select|choose|check|submit|press|book|buy|add|follow|download|log in|sign in)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_][\w.\-/]*", re.UNICODE)
_MAX_ANSWER_CHARS = 300

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    "required": ["answer"],
}


def asks_a_question(goal: str) -> bool:
    """Whether the goal asks to be told something (a question mark, "tell me", or a
    sentence that opens with an interrogative) rather than to do something: "Which
    function does X? Open its entry." is done by opening the entry, unless the goal also
    asks to be told."""
    if not _QUESTION.search(goal):
        return False
    return not _DO.search(goal) or bool(_TELL.search(goal))


def applies(mode: AnswerCheckMode, goal: str, *, by_default: bool) -> bool:
    """Whether the check runs for this goal; ``by_default``: what ``auto`` means for the
    model (its profile's ``answer_check``)."""
    on = mode == "on" or (mode == "auto" and by_default)
    return on and asks_a_question(goal)


def grounded(answer: str, view_text: str) -> bool:
    """Whether every word of ``answer`` occurs in the view (case-insensitive)."""
    words = _WORD.findall(answer.lower())
    page = view_text.lower().replace("\\xa0", " ")
    return bool(words) and all(word.strip(".-/") in page for word in words)


@dataclass
class ReasoningAnswer:
    """What the check found: the answer it takes, or why it took none."""

    answer: str | None = None
    rejected: str | None = None
    """An answer the model gave that was not taken, and why."""
    calls: list[LLMCall] = field(default_factory=list)


def _read(text: str) -> str | None:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ResponseFormatError(f"Not JSON: {exc}. Answer with the JSON object only.") from exc
    if not isinstance(value, dict) or "answer" not in value:
        raise ResponseFormatError('Reply with an object with one key, "answer": a string or null.')
    answer = value["answer"]
    if answer is None:
        return None
    if not isinstance(answer, str):
        raise ResponseFormatError("answer must be a string or null.")
    answer = answer.strip()
    return answer[:_MAX_ANSWER_CHARS] or None


async def answer_from_reasoning(
    model: ChatModel, goal: str, reasoning: str, view_text: str, *, retries: int = 1,
) -> ReasoningAnswer:
    """Ask whether ``reasoning`` states the answer to ``goal``; take it when grounded."""

    def messages(constrained: bool) -> list[dict[str, Any]]:
        return [{"role": "user", "content": render_prompt(
            "answer_check.md", goal=goal, reasoning=reasoning.strip(),
            answer_format="" if constrained else render_prompt("answer_check_format.md"))}]

    result = await ask_structured(
        model, messages, _read, constraint=Constraint.json_schema("answer", SCHEMA),
        purpose="action", retries=retries, history="last", temperature=0,
        reask=lambda problem, _text: {"role": "user", "content": problem},
    )
    found = ReasoningAnswer(calls=result.calls)
    if result.value is None:
        return found
    if not grounded(result.value, view_text):
        found.rejected = f"{result.value!r}: not on the page shown"
        return found
    found.answer = result.value
    return found
