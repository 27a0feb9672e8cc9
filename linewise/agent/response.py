"""Reading the action model's answer: ``<think>…</think><action>…</action>``."""

from __future__ import annotations

import re
from collections.abc import Collection

from pydantic import BaseModel

from linewise.agent.action_parser import ParsedAction, parse_action
from linewise.errors import ActionParseError

_THINK = re.compile(r"<think>(.*?)(?:</think>|(?=<action>)|\Z)", re.DOTALL | re.IGNORECASE)
_ACTION = re.compile(r"<action>(.*?)(?:</action>|\Z)", re.DOTALL | re.IGNORECASE)


class AgentAnswer(BaseModel):
    """The parts of one answer; ``action`` is set only when the action text is valid."""

    think: str | None = None
    action_text: str | None = None
    action: ParsedAction | None = None
    error: str | None = None


def parse_answer(text: str, action_names: Collection[str] | None = None) -> AgentAnswer:
    """Split an answer into its thought and its validated action.

    An answer must hold one action. Several ``<action>`` blocks are accepted only when
    exactly one distinct call among them is valid (a model sometimes quotes the format's
    placeholder first); two different valid calls are an error, never a guess. An
    unclosed tag at the end of the answer is accepted, as a truncated answer often is.
    ``action_names`` are the actions the prompt offered (default: all); a call of any
    other is an error, as for ``parse_action``.
    """
    think_match = _THINK.search(text)
    think = think_match.group(1).strip() if think_match else None
    blocks = [block.strip() for block in _ACTION.findall(text)]
    if not blocks:
        return AgentAnswer(
            think=think,
            error="The answer has no <action>…</action> block.",
        )
    valid: dict[str, tuple[str, ParsedAction]] = {}
    last_error: ActionParseError | None = None
    for block in blocks:
        try:
            action = parse_action(block, action_names)
        except ActionParseError as exc:
            last_error = exc
            continue
        valid.setdefault(str(action), (block, action))
    if len(valid) > 1:
        return AgentAnswer(
            think=think, action_text=blocks[-1],
            error=f"The answer has {len(blocks)} <action> blocks with different actions "
            f"({', '.join(valid)}); give exactly one.",
        )
    if not valid:
        return AgentAnswer(think=think, action_text=blocks[-1], error=str(last_error))
    ((action_text, action),) = valid.values()
    return AgentAnswer(think=think, action_text=action_text, action=action)
