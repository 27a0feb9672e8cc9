"""What linewise knows of one model behind one endpoint: its :class:`ModelProfile`.

Every question of the form "which model is this, what does it take?" is answered here,
by the profile of the model object (:func:`profile_of`), never by asking whether the
model is the embedded one:

- how many tokens it reads (``context_tokens``) and writes (``answer_tokens``), how
  much of a page it reads comfortably in one step (``view_budget_tokens``) and per
  retriever call (``window_tokens``), and which tokenizer counts for it;
- how its endpoint is told an answer's structure: the request field of a GBNF grammar
  (``grammar_field``, None for an endpoint that takes none) and of a JSON schema
  (``json_schema_field``); :meth:`ModelProfile.request_params` writes them, so no caller
  writes a server's wire format;
- the defaults a small model needs and a large one does not: whether actions are
  decoded under the grammar unless told otherwise, whether an answer is looked for in
  its reasoning, whether it is shown its own past thoughts.

The runtime resolves one profile per endpoint, from the settings and the endpoint's
probe (``runtime.models.profiles``), and gives it to the endpoint's client. A model
object that carries none (a ``FunctionModel``, a caller's own model) is asked in the
terms of the ``ChatModel`` protocol: :data:`DEFAULT_PROFILE`, whose wire fields are the
ones the protocol documents (``response_format``, ``extra_body.grammar``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from linewise.agent.constraint import Constraint, ConstraintKind
from linewise.settings import DEFAULT_CONTEXT_TOKENS, ENDPOINT_VIEW_BUDGET_TOKENS, EndpointSettings
from linewise.tokens import DEFAULT_ENCODING

JsonSchemaField = Literal["response_format", "guided_json"]
"""``response_format``: OpenAI's ``{"type": "json_schema", ...}`` (llama.cpp and vLLM
take it too); ``guided_json``: the bare schema in the body, vLLM's own field."""

DEFAULT_ANSWER_TOKENS: int = EndpointSettings.model_fields["max_tokens"].default


@dataclass(frozen=True)
class ModelProfile:
    """One model behind one endpoint: its sizes, its request format and its defaults."""

    name: str = "openai-compatible"
    """The named profile it was resolved from (``runtime.models.profiles.PROFILES``)."""
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    """The context the prompts are fitted into."""
    answer_tokens: int = DEFAULT_ANSWER_TOKENS
    """The longest answer asked for (the endpoint's ``max_tokens``)."""
    view_budget_tokens: int = ENDPOINT_VIEW_BUDGET_TOKENS
    """The page tokens the model is shown comfortably as the action model (``auto``
    filters a larger page down to it)."""
    window_tokens: int | None = None
    """Observation tokens per call as the retriever (None: as much as the context holds)."""
    grammar_field: str | None = "grammar"
    """The request body's field for a GBNF grammar (sent in ``extra_body``); None: the
    endpoint takes no grammar, and none is ever sent."""
    json_schema_field: JsonSchemaField | None = "response_format"
    """The request field for a JSON schema; None: the endpoint takes none."""
    grammar_by_default: bool = False
    """``action_grammar=auto`` decodes actions under the grammar: a small model writes a
    malformed call often enough that constraining every answer pays for itself."""
    answer_check: bool = False
    """``answer_check=auto`` looks for the answer in the reasoning: a small model states
    an answer in its thoughts and then acts as if it had not."""
    past_thoughts: bool = True
    """``past_thoughts=auto`` shows the model its own past thoughts: a small model copies
    its last thought and acts on it again, a large one uses them."""
    tokenizer: str = DEFAULT_ENCODING
    """The tiktoken encoding prompts are counted with for this model."""

    def takes(self, kind: ConstraintKind) -> bool:
        """Whether the endpoint has a request field for constraints of this kind."""
        return (self.grammar_field if kind == "grammar" else self.json_schema_field) is not None

    def request_params(self, constraint: Constraint) -> dict[str, Any]:
        """The request parameters that carry ``constraint`` to this endpoint ({} when it
        has no field for its kind)."""
        if constraint.kind == "json_schema":
            if self.json_schema_field == "response_format":
                return {"response_format": {"type": "json_schema", "json_schema": {
                    "name": constraint.name, "schema": constraint.schema}}}
            if self.json_schema_field is not None:
                return {"extra_body": {self.json_schema_field: constraint.schema}}
            return {}
        if self.grammar_field is None:
            return {}
        return {"extra_body": {self.grammar_field: constraint.grammar}}

    def with_constraint(self, params: dict[str, Any], constraint: Constraint) -> dict[str, Any]:
        """``params`` with ``constraint``'s fields added (``extra_body`` merged, not
        replaced)."""
        merged = dict(params)
        for key, value in self.request_params(constraint).items():
            if key == "extra_body":
                merged[key] = {**(merged.get(key) or {}), **value}
            else:
                merged[key] = value
        return merged

    def replace(self, **changes: Any) -> ModelProfile:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)


DEFAULT_PROFILE = ModelProfile()
"""The profile of a model that carries none: an OpenAI-compatible endpoint of unknown
kind, asked in the ``ChatModel`` protocol's own terms."""


def profile_of(model: object) -> ModelProfile:
    """The profile ``model`` carries (its ``profile`` attribute), else
    :data:`DEFAULT_PROFILE` with the ``context_tokens`` and ``answer_tokens`` the model
    states, if it states them."""
    profile = getattr(model, "profile", None)
    if isinstance(profile, ModelProfile):
        return profile
    stated = {key: value for key in ("context_tokens", "answer_tokens")
              if isinstance(value := getattr(model, key, None), int) and value > 0}
    return DEFAULT_PROFILE.replace(**stated) if stated else DEFAULT_PROFILE
