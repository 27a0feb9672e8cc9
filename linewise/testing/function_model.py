"""An in-process model whose answers come from a Python function.

``FunctionModel`` implements the ``ChatModel`` protocol without a server: each call runs
the function on the messages and the call's parameters. It is for tests and examples
that need a model whose answers are known in advance, and for wiring linewise to any
model that is not behind an OpenAI-compatible endpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from linewise.agent.constraint import ConstraintKind
from linewise.agent.models import Completion
from linewise.errors import LLMError


@dataclass(frozen=True)
class CallInfo:
    """What a model function is told besides the messages."""

    params: dict[str, Any]
    """The call's parameters (``temperature``, ``max_tokens``, ``response_format``…)."""
    index: int
    """How many calls the model answered before this one."""


@dataclass(frozen=True)
class ModelRequest:
    """One call a ``FunctionModel`` received."""

    messages: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)


ModelFunction = Callable[[list[dict[str, Any]], CallInfo], str | Completion]
"""(messages, info) -> the answer text, or a whole ``Completion`` (with usage, logprobs)."""


class FunctionModel:
    """A ``ChatModel`` answering every call with ``function(messages, info)``.

    The function may raise ``LLMError`` to play a failing model. A text answer comes
    back without usage, so trace records carry linewise's own token counts. Every call
    is kept in ``requests``.
    """

    def __init__(self, function: ModelFunction, *, model: str = "function") -> None:
        self.function = function
        self.model = model
        self.requests: list[ModelRequest] = []
        self.refused_constraints: set[ConstraintKind] = set()
        """The constraint kinds a call refused with a 400 (``agent.structured``): asked
        without them from then on, as a ``ChatClient`` is."""

    @classmethod
    def answering(cls, answers: Iterable[str], *, model: str = "function") -> FunctionModel:
        """A model giving ``answers`` in order, one per call; one call more is an
        ``LLMError``."""
        pending = list(answers)

        def next_answer(messages: list[dict[str, Any]], info: CallInfo) -> str:
            if info.index >= len(pending):
                raise LLMError(f"{model} has no answer left for call {info.index + 1}: "
                               f"it was given {len(pending)}")
            return pending[info.index]

        return cls(next_answer, model=model)

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Completion:
        info = CallInfo(params=dict(params), index=len(self.requests))
        self.requests.append(ModelRequest(messages=list(messages), params=dict(params)))
        answer = self.function(messages, info)
        return answer if isinstance(answer, Completion) else Completion(text=answer)
