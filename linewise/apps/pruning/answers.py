"""The extractor's answer schemas: what the LLM must answer in each phase, as pydantic
models (to validate the answer) and JSON schemas (to constrain it where the endpoint can).

Phase 1 answers one action node (:class:`ActionNodeAnswer`); phase 2 the pieces of
information a page gave and what the next action relied on (:class:`InfoAnswer`). A piece
that copies the prompt's own lines rather than report the page is dropped on validation.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, field_validator, model_validator

from linewise.agent.actions import ACTIONS
from linewise.apps.pruning.workspace import normal
from linewise.prompts import load_prompt

ACTION_TYPES = (*ACTIONS, "none")
"""The node vocabulary: the browser actions, and "none" for a step whose answer held no
valid action."""

_ACTION_COPY = re.compile(r"^\s*(?:A\d+\s*(?::|$)|(?:Type|Goal|Thought|Action)\s*:)")
_TRAILING_PARENS = re.compile(r"\s*\([^()]*\)\s*$")


@cache
def _prompt_headings() -> frozenset[str]:
    """The section headings of the phase-2 prompt, as ``_heading_key`` gives them."""
    template = load_prompt("prune_info_nodes.md").template
    return frozenset(_heading_key(line[2:]) for line in template.splitlines()
                     if line.startswith("# "))


def _heading_key(text: str) -> str:
    """A heading without its trailing parenthesis (``(I0)``, ``($next_id)``, ``(A4)``)."""
    return normal(_TRAILING_PARENS.sub("", text))


def copies_the_prompt(text: str) -> bool:
    """Whether a piece copies the prompt's own lines (an action line such as
    ``"A2: click('44')"`` or ``"Thought: …"``, or a section heading such as ``"The page
    the agent then saw"`` or ``"The agent's next action (A4)"``) rather than report
    something on the page."""
    if _ACTION_COPY.match(text):
        return True
    return _heading_key(text) in _prompt_headings()


class ActionNodeAnswer(BaseModel):
    type: str
    goal: str = Field(min_length=1)

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        value = value.strip()
        if value not in ACTION_TYPES:
            raise ValueError(f"type must be one of {', '.join(ACTION_TYPES)}, not {value!r}")
        return value


class InfoUnit(BaseModel):
    text: str = Field(min_length=1)
    same_as: str | None = None
    used_by_next: bool = False


class InfoAnswer(BaseModel):
    information: list[InfoUnit] = Field(default_factory=list)
    next_relies_on: list[str] = Field(default_factory=list)
    _prompt_copies: int = PrivateAttr(default=0)

    @model_validator(mode="after")
    def _drop_prompt_copies(self) -> InfoAnswer:
        """Pieces that copy the prompt's own lines are not information: drop them."""
        pieces = [unit for unit in self.information if not copies_the_prompt(unit.text)]
        self._prompt_copies = len(self.information) - len(pieces)
        self.information = pieces
        return self

    @property
    def prompt_copies(self) -> int:
        """How many pieces were dropped for copying the prompt's own lines."""
        return self._prompt_copies


ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"type": {"type": "string", "enum": list(ACTION_TYPES)},
                   "goal": {"type": "string"}},
    "required": ["type", "goal"],
}


def info_schema(known_ids: list[str], max_units: int) -> dict[str, Any]:
    """The phase-2 answer schema, with node references limited to the workspace's ids.

    Where the endpoint enforces schemas (llama.cpp compiles them into a grammar), a
    reference outside the workspace cannot be written at all: small models otherwise
    answer with the page's element ids (``"same_as": "44"``) and fail validation again
    and again. The list of pieces is capped at ``max_units`` for the same reason: a model
    that enumerates a long page otherwise runs into ``max_tokens`` mid-JSON.
    """
    reference = {"type": "string", "enum": list(known_ids)}
    return {
        "type": "object",
        "properties": {
            "information": {"type": "array", "maxItems": max_units, "items": {
                "type": "object",
                "properties": {"text": {"type": "string"},
                               "same_as": {"anyOf": [reference, {"type": "null"}]},
                               "used_by_next": {"type": "boolean"}},
                "required": ["text", "same_as", "used_by_next"],
            }},
            "next_relies_on": {"type": "array", "items": reference},
        },
        "required": ["information", "next_relies_on"],
    }
