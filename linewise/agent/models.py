"""The model interface: what the policy, the line retriever and the pruner need from an LLM.

A model is any object with a ``model`` name and an async ``complete`` method that turns
chat messages into a :class:`Completion` (the answer text, and the token usage when the
model knows it). ``runtime.models.chat.ChatClient`` is one, over any OpenAI-compatible
endpoint; ``linewise.testing.FunctionModel`` is one, in-process, over a Python function.

Models do not build trace records: :func:`call_model` does, for every caller alike, so
that every ``LLMCall`` has its messages, answer, tiktoken counts (whatever the model
reported is kept beside them in ``usage``), latency and attempt, and a failed call raises
an ``LLMError`` that carries its partial record (with the endpoint's raw body when it
sent one that was not a completion).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import structlog
from pydantic import BaseModel, ConfigDict

from linewise.errors import InvalidResponse, LLMError
from linewise.records import LLMCall
from linewise.tokens import count_message_tokens, count_tokens

log = structlog.get_logger(__name__)

Purpose = Literal["action", "retriever", "other"]
"""What a call is for; the trace's token totals are kept per purpose."""


@dataclass(frozen=True)
class TokenLogprob:
    """One answer token and its log-probability under the model."""

    token: str
    logprob: float


class Usage(BaseModel):
    """The token counts a model reports for one call. Other fields a server sends
    (``total_tokens``, cache details…) are kept as they came."""

    model_config = ConfigDict(extra="allow")

    prompt_tokens: int = 0
    completion_tokens: int = 0


class Completion(BaseModel):
    """What a model answered to one call."""

    text: str
    usage: Usage | None = None
    logprobs: list[TokenLogprob] | None = None
    """Per answer token, when the call asked for ``logprobs=True`` and the model can."""


class ChatModel(Protocol):
    """What linewise needs from an LLM.

    ``complete`` takes OpenAI-style chat messages and sampling parameters
    (``temperature``, ``max_tokens``, ``response_format``…; a model passes on what it
    understands). ``logprobs=True`` asks for the log-probability of every answer token;
    a model that cannot give them answers with ``logprobs=None``. A failure raises
    ``LLMError`` (``EndpointUnreachable`` when nothing answers, ``status`` set when an
    endpoint answered with an error status).
    """

    model: str
    """The model's name, as traces show it."""

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Completion: ...


@runtime_checkable
class ServedModel(Protocol):
    """A model behind an endpoint: its URL goes into the trace records."""

    base_url: str


async def call_model(
    model: ChatModel,
    messages: list[dict[str, Any]],
    *,
    purpose: Purpose = "action",
    attempt: int = 0,
    **params: Any,
) -> LLMCall:
    """Ask ``model`` once and return the trace record of the call.

    Raises the model's ``LLMError``, of the same class, with the partial record (the
    messages, the latency, the error) as its ``call``.
    """
    record, _ = await _recorded_call(model, messages, purpose, attempt, params)
    return record


async def call_model_with_logprobs(
    model: ChatModel,
    messages: list[dict[str, Any]],
    *,
    purpose: Purpose = "other",
    attempt: int = 0,
    **params: Any,
) -> tuple[LLMCall, list[TokenLogprob] | None]:
    """``call_model`` asking for the log-probability of every answer token.

    The second value is ``None`` when the model sent no logprobs (not every server
    implements them); errors are those of ``call_model``.
    """
    record, completion = await _recorded_call(
        model, messages, purpose, attempt, {**params, "logprobs": True}
    )
    return record, completion.logprobs or None


async def _recorded_call(
    model: ChatModel,
    messages: list[dict[str, Any]],
    purpose: Purpose,
    attempt: int,
    params: dict[str, Any],
) -> tuple[LLMCall, Completion]:
    record = LLMCall(
        purpose=purpose,
        model=model.model,
        base_url=model.base_url if isinstance(model, ServedModel) else "",
        messages=messages,
        prompt_tokens=count_message_tokens(messages),
        attempt=attempt,
    )
    started = time.perf_counter()
    try:
        completion = await model.complete(messages, **params)
    except LLMError as exc:
        record.latency_ms = (time.perf_counter() - started) * 1000
        record.error = str(exc)
        if isinstance(exc, InvalidResponse):  # nothing the endpoint sent is lost
            record.raw_body = exc.raw_body
        log.warning("llm call failed", model=model.model, error=str(exc))
        raise exc.recorded(record) from exc
    record.latency_ms = (time.perf_counter() - started) * 1000
    record.response = completion.text
    record.completion_tokens = count_tokens(completion.text)
    if completion.usage is not None:
        record.usage = completion.usage.model_dump(exclude_none=True)
    return record, completion
