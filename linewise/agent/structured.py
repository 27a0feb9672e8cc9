"""One way to ask a model for an answer of a given structure, for every caller.

A caller (the line retriever, focus's chooser, query expansion, the pruner's extractor,
the action policy) describes what it wants and how to read it; :func:`ask_structured`
holds the conversation:

1. It asks under the caller's :class:`Constraint` — a JSON schema or a GBNF grammar,
   in the request fields the model's profile names (``agent.profile``) — unless the
   profile has no field for that kind or the model's endpoint already refused it.
2. An endpoint that refuses the constraint (HTTP 400) is remembered as refusing that
   kind by the model object itself (:func:`mark_refused`: each client keeps its own
   refusals, so two clients never share one), and the question is asked again without
   it, in the words the caller gives for an unconstrained ask.
3. An answer the caller's ``read`` refuses (``ResponseFormatError``, whose message is
   meant for the model) is shown back with the caller's re-ask message, up to
   ``retries`` times; ``history="last"`` keeps only the latest failed exchange.
4. Before every re-ask the caller's ``may_reask`` can stop the conversation (a spending
   limit).

Nothing here raises for the model's answers or the endpoint's faults: the
:class:`StructuredAnswer` carries the value or the error and every call made, so that
every caller keeps its own fallback (a retriever shows the page whole, the extractor
stops the build).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import structlog

from linewise.agent.constraint import Constraint, ConstraintKind
from linewise.agent.models import ChatModel, Purpose, call_model
from linewise.agent.profile import profile_of
from linewise.errors import LLMError, ResponseFormatError
from linewise.records import LLMCall

log = structlog.get_logger(__name__)

T = TypeVar("T")

__all__ = ["Constraint", "ConstraintKind", "StructureMode", "StructuredAnswer", "ask_structured",
           "mark_refused", "supports", "will_constrain"]

StructureMode = Literal["auto", "on", "off"]
"""``auto``: constrain, and ask without once the endpoint refuses; ``on``: constrain,
and an endpoint that refuses fails the call; ``off``: never constrain."""

Messages = list[dict[str, Any]]


REFUSALS_ATTRIBUTE = "refused_constraints"
"""The attribute where a model object keeps the constraint kinds its endpoint refused
(a ``set``): ``ChatClient`` and ``FunctionModel`` have one."""


def supports(model: ChatModel, kind: ConstraintKind) -> bool:
    """Whether ``model``'s endpoint takes constraints of this kind: its profile has a
    request field for it, and the endpoint has not refused one (yet)."""
    return profile_of(model).takes(kind) and kind not in getattr(model, REFUSALS_ATTRIBUTE, ())


def mark_refused(model: ChatModel, kind: ConstraintKind) -> None:
    """Remember, on ``model`` itself, that its endpoint refuses constraints of this kind.
    A model with no such memory is not remembered: every ask tries the constraint again
    (one refused call more, answered the same way)."""
    refused = getattr(model, REFUSALS_ATTRIBUTE, None)
    if isinstance(refused, set):
        refused.add(kind)


def will_constrain(model: ChatModel, kind: ConstraintKind, mode: StructureMode) -> bool:
    """Whether an ask in ``mode`` would carry a constraint of this kind to ``model``
    (``on`` insists after a refusal, but cannot send what the profile has no field for)."""
    if mode == "on":
        return profile_of(model).takes(kind)
    return mode == "auto" and supports(model, kind)


@dataclass
class StructuredAnswer(Generic[T]):
    """The outcome of one structured ask."""

    value: T | None = None
    calls: list[LLMCall] = field(default_factory=list)
    error: str | None = None
    """Why no value came out: the last answer's problem, or the endpoint's fault."""
    failure: LLMError | None = None
    """The endpoint's fault that ended the ask, if one did (not a refused answer)."""
    constrained: bool = False
    """Whether the answer was asked for under the constraint."""
    refused: bool = False
    """Whether the endpoint refused the constraint during this ask."""
    last_text: str | None = None
    """The last answer's text."""
    stopped: str | None = None
    """Why a re-ask was not made (``may_reask``'s reason)."""


async def ask_structured(
    model: ChatModel,
    messages: Callable[[bool], Messages],
    read: Callable[[str], T],
    *,
    constraint: Constraint | None,
    mode: StructureMode = "auto",
    reask: Callable[[str, str], dict[str, Any]],
    retries: int,
    purpose: Purpose = "other",
    history: Literal["all", "last"] = "all",
    reask_params: dict[str, Any] | None = None,
    may_reask: Callable[[list[LLMCall]], str | None] | None = None,
    first_attempt: int = 0,
    **params: Any,
) -> StructuredAnswer[T]:
    """Ask until ``read`` accepts an answer, ``retries`` re-asks are spent, or the
    endpoint fails.

    Args:
        messages: the first request, for a constrained ask (True) or not (False): a
            prompt may describe the answer format only when no constraint carries it.
        read: the answer's text to its value; raises ``ResponseFormatError`` whose
            message is shown to the model when it is asked again.
        constraint: the schema or grammar; None asks unconstrained.
        mode: see :data:`StructureMode`.
        reask: (problem, failed answer text) to the user message of the re-ask.
        retries: re-asks after a refused answer.
        history: ``all`` keeps every failed exchange in the re-ask, ``last`` only the
            latest (a step's conversation stays bounded).
        reask_params: sampling parameters of the re-asks (e.g. a higher temperature).
        may_reask: given the calls so far, why no re-ask may be made, or None.
        first_attempt: the ``attempt`` of the first call's record (calls the caller
            made before, in the same decision).
        params: sampling parameters of every call.
    """
    result: StructuredAnswer[T] = StructuredAnswer()
    profile = profile_of(model)
    constrained = constraint is not None and will_constrain(model, constraint.kind, mode)
    first = messages(constrained)
    conversation = first
    attempt = 0
    while attempt <= retries:
        if attempt and may_reask is not None and (reason := may_reask(result.calls)):
            log.info("re-ask not made", reason=reason)
            result.stopped = reason
            return result
        call_params = {**params, **((reask_params or {}) if attempt else {})}
        if constrained and constraint is not None:
            call_params = profile.with_constraint(call_params, constraint)
        result.constrained = constrained
        try:
            call = await call_model(model, conversation, purpose=purpose,
                                    attempt=first_attempt + len(result.calls), **call_params)
        except LLMError as exc:
            if exc.call is not None:
                result.calls.append(exc.call)
            if constrained and constraint is not None and mode == "auto" and exc.status == 400:
                log.info("the endpoint refuses the constraint; asking without it",
                         kind=constraint.kind, name=constraint.name)
                mark_refused(model, constraint.kind)
                constrained, result.refused = False, True
                first = messages(False)
                conversation = first
                continue
            result.error, result.failure = str(exc), exc
            return result
        result.calls.append(call)
        text = call.response or ""
        result.last_text = text
        try:
            result.value = read(text)
            result.error = None
            return result
        except ResponseFormatError as exc:
            result.error = str(exc)
            log.info("answer refused", name=constraint.name if constraint else purpose,
                     attempt=attempt, error=result.error)
        previous = first if history == "last" else conversation
        conversation = [*previous, {"role": "assistant", "content": text},
                        reask(result.error, text)]
        attempt += 1
    return result
