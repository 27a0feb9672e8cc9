"""The action policy: one LLM decision per step, re-asked when the answer is malformed."""

from __future__ import annotations

from typing import Protocol

import structlog
from pydantic import BaseModel, Field

from ..runtime.trace import LLMCall
from .action_parser import ParsedAction
from .prompt import PageView, StepMemory, build_action_messages, retry_message
from .response import parse_answer

log = structlog.get_logger(__name__)


class ChatModel(Protocol):
    """What the policy needs from an LLM client (``runtime.llm.ChatClient`` is one)."""

    model: str

    async def chat(
        self, messages: list[dict[str, str]], *, purpose: str = ..., attempt: int = ...
    ) -> LLMCall: ...


class Decision(BaseModel):
    """The outcome of one step's deliberation."""

    think: str | None = None
    action: ParsedAction | None = None
    action_text: str | None = None
    error: str | None = Field(
        default=None, description="Why no valid action came out, after all retries."
    )
    calls: list[LLMCall] = Field(default_factory=list)


class ActionAgent:
    """A GenericAgent-style policy: goal, page, history and action space in; one action out.

    A malformed answer (no ``<action>`` block, a call that does not parse, a wrong
    argument) is shown back to the model, which is asked again up to ``parse_retries``
    times. The conversation of retries stays within the step.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        parse_retries: int = 2,
        action_names: list[str] | None = None,
    ) -> None:
        self.model = model
        self.parse_retries = parse_retries
        self.action_names = action_names
        self.history: list[StepMemory] = []

    def reset(self) -> None:
        self.history = []

    async def decide(self, goal: str, view: PageView) -> Decision:
        messages = build_action_messages(goal, view, self.history, self.action_names)
        decision = Decision()
        for attempt in range(self.parse_retries + 1):
            call = await self.model.chat(messages, purpose="action", attempt=attempt)
            decision.calls.append(call)
            answer = parse_answer(call.response or "")
            decision.think = answer.think
            decision.action_text = answer.action_text
            if answer.action is not None:
                decision.action = answer.action
                decision.error = None
                return decision
            decision.error = answer.error
            log.info("malformed answer", attempt=attempt, error=answer.error)
            messages = [
                *messages,
                {"role": "assistant", "content": call.response or ""},
                retry_message(answer.error or "unreadable answer"),
            ]
        return decision

    def remember(self, decision: Decision, action_error: str | None) -> None:
        """Add the step to the history the next prompt shows."""
        self.history.append(
            StepMemory(
                think=decision.think,
                action=str(decision.action) if decision.action else decision.action_text,
                error=action_error or decision.error,
            )
        )
