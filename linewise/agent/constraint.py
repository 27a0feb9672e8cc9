"""What an answer must be, as a caller asks for it: a JSON schema or a GBNF grammar.

A :class:`Constraint` says nothing of how an endpoint is told: each server takes its own
request field (llama.cpp ``grammar``, vLLM ``guided_grammar``, OpenAI
``response_format``). The field is the model's to choose, through its profile
(``agent.profile.ModelProfile.request_params``), so that a caller never writes a
server's wire format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ConstraintKind = Literal["json_schema", "grammar"]


@dataclass(frozen=True)
class Constraint:
    """What the answer must be: a JSON schema or a grammar, under a name."""

    kind: ConstraintKind
    name: str
    schema: dict[str, Any] | None = None
    grammar: str | None = None

    @classmethod
    def json_schema(cls, name: str, schema: dict[str, Any]) -> Constraint:
        return cls("json_schema", name, schema=schema)

    @classmethod
    def gbnf(cls, name: str, grammar: str) -> Constraint:
        return cls("grammar", name, grammar=grammar)
