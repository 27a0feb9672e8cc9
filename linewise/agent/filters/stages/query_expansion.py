"""Query expansion: the retriever model says which words the needed element shows.

Lexical matching finds an element its goal names and misses one the goal paraphrases
("the town I live in" for a field labelled ``City``; "turns an object into a text
string" for ``json.dumps``). Reading a 20,000-line page is too slow for a small model,
but reading the goal is not: one short call (the goal, the actions so far with the
elements they named, the page title; no page content) returns the terms the page is
likely to use, and those are matched against every line like the goal's own words.
The call's input is a few hundred tokens whatever the page's size, and its answer is
reused while the goal and the history are unchanged.

:func:`.term_match.term_groups` turns the terms into candidate groups: the best lines
of each term in turn, so one strong term (``IBAN``) is not drowned by several weak ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from linewise.agent.filters.base import FilterInput
from linewise.agent.models import ChatModel
from linewise.agent.structured import Constraint, StructureMode, ask_structured
from linewise.agent.text.bm25 import words
from linewise.axtree import bid_of, parse_line
from linewise.prompts import render_prompt
from linewise.records import LLMCall

__all__ = ["Expansion", "QueryExpander", "parse_terms"]

_MAX_TERM_CHARS = 60
_JSON_DEBRIS = re.compile(r'[{}\[\]]|":')
_FENCE = re.compile(r"^```[a-z]*\s*|\s*```$", re.MULTILINE)


class _Terms(BaseModel):
    terms: list[str] = Field(default_factory=list)


TERMS_SCHEMA: dict[str, Any] = _Terms.model_json_schema()


def parse_terms(answer: str, max_terms: int) -> list[str]:
    """The terms of an answer: the JSON object asked for, a bare JSON list, or one term
    per line or comma when the model ignored the format. Duplicates and empty terms
    are dropped."""
    text = _FENCE.sub("", answer.strip())
    raw: list[Any] = []
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            raw = _Terms.model_validate(data).terms
        elif isinstance(data, list):
            raw = data
    except (json.JSONDecodeError, ValidationError):
        match = re.search(r"\[.*\]", text, re.DOTALL)
        try:
            raw = json.loads(match.group(0)) if match else []
        except json.JSONDecodeError:
            raw = []
        if not raw:
            raw = re.split(r"[\n,;]+", text)
    seen: set[str] = set()
    terms: list[str] = []
    for item in raw:
        term = str(item).strip().strip("\"'`-•* ")[:_MAX_TERM_CHARS]
        if _JSON_DEBRIS.search(term):  # a half-written object parsed as loose text
            continue
        if term and term.lower() not in seen and words(term):
            seen.add(term.lower())
            terms.append(term)
    return terms[:max_terms]


@dataclass
class Expansion:
    terms: list[str] = field(default_factory=list)
    calls: list[LLMCall] = field(default_factory=list)
    error: str | None = None
    reused: bool = False


class QueryExpander:
    """Asks the model for the page's likely words, once per goal and history."""

    def __init__(
        self, model: ChatModel, *, max_terms: int = 12, answer_tokens: int = 128,
        recent_actions: int = 3, json_schema: StructureMode = "auto",
    ) -> None:
        self.model = model
        self.max_terms = max_terms
        self.answer_tokens = answer_tokens
        self.recent_actions = recent_actions
        self._schema_mode = json_schema
        self._cache: dict[tuple[str, ...], list[str]] = {}

    def messages(self, observation: FilterInput, history: str | None = None
                 ) -> list[dict[str, Any]]:
        """The request; ``history`` is :meth:`_history`'s text when already made."""
        return [{"role": "user", "content": render_prompt(
            "retriever_expand.md", title=_title(observation.lines) or "(none)",
            goal=observation.goal.strip(),
            history=history if history is not None else self._history(observation),
            max_terms=self.max_terms,
        )}]

    async def expand(self, observation: FilterInput) -> Expansion:
        history = self._history(observation)
        key = (observation.goal, history)
        if key in self._cache:
            return Expansion(terms=self._cache[key], reused=True)
        messages = self.messages(observation, history)
        result = Expansion()
        asked = await ask_structured(
            self.model, lambda _constrained: messages,
            lambda text: parse_terms(text, self.max_terms),
            constraint=Constraint.json_schema("terms", TERMS_SCHEMA), mode=self._schema_mode,
            reask=lambda error, _text: {"role": "user", "content": error}, retries=0,
            purpose="retriever", max_tokens=self.answer_tokens, temperature=0,
        )
        result.calls = asked.calls
        if asked.failure is not None:
            result.error = f"query expansion failed: {asked.failure}"
            return result
        result.terms = asked.value or []
        if not result.terms:
            result.error = result.error or "the model named no term"
        self._cache[key] = result.terms
        return result

    def _history(self, observation: FilterInput) -> str:
        """The recent actions, each with the element it named as the page shows it
        (a bid alone says nothing to a model that does not see the page)."""
        recent = observation.history[-self.recent_actions:]
        if not recent:
            return "(nothing yet)"
        by_bid = {b: line for line in observation.lines if (b := bid_of(line))}
        described = []
        for action in recent:
            named = [_element(by_bid[b]) for b in action.bids if b in by_bid]
            described.append(f"- {action.text.strip()}" + (f"  ({'; '.join(named)})" if named
                                                             else ""))
        return "\n".join(described)


def _element(line: str) -> str:
    parsed = parse_line(line)
    return f"{parsed.role} '{parsed.name}'" if parsed.name else parsed.role


def _title(lines: Sequence[str]) -> str:
    for line in lines[:3]:
        parsed = parse_line(line)
        if parsed.role == "RootWebArea" and parsed.name:
            return parsed.name
    return ""
