"""Asking a retriever for line ranges: the answer's schema, its format in the prompt,
and the re-ask after an unusable answer. The ``lines*`` filters and ``focus``'s chooser
both ask this way, through ``agent.structured``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from linewise.agent.filters.retriever.defend import defend_answer_format, defend_schema
from linewise.agent.structured import Constraint
from linewise.prompts import render_prompt

# No maxLength on "think": llama.cpp compiles bounded repetition into a grammar that
# makes constrained decoding several times slower (docs/design.md, "Structured
# answers"). The prompt asks for one or two sentences instead.
RANGES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "think": {"type": "string"},
        "ranges": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "integer"}, "minItems": 2,
                      "maxItems": 2},
        },
    },
    "required": ["think", "ranges"],
    "additionalProperties": False,
}


def ranges_constraint(defend: bool) -> Constraint:
    """The JSON schema of a ranges answer (with the injections list in defender mode)."""
    return Constraint.json_schema(
        "line_ranges", defend_schema(RANGES_SCHEMA) if defend else RANGES_SCHEMA)


def ranges_answer_format(constrained: bool, defend: bool) -> str:
    """How the prompt asks for the answer: JSON when the schema carries it, else tags."""
    if defend:
        return defend_answer_format(constrained)
    return render_prompt(
        "retriever_answer_json.md" if constrained else "retriever_answer_tags.md")


def ranges_reask(total: int) -> Callable[[str, str], dict[str, Any]]:
    """The re-ask after an unusable ranges answer, for a page of ``total`` lines."""
    def reask(error: str, _answer: str) -> dict[str, Any]:
        return {"role": "user", "content": render_prompt(
            "retriever_retry.md", error=error, total=total)}
    return reask
