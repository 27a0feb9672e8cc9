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

    The last ``<action>`` block wins (models sometimes quote an example first). An
    unclosed tag at the end of the answer is accepted, as a truncated answer often is.
    ``action_names`` are the actions the prompt offered (default: all); a call of any
    other is an error, as for ``parse_action``.
    """
    think_match = _THINK.search(text)
    think = think_match.group(1).strip() if think_match else None
    actions = _ACTION.findall(text)
    if not actions:
        return AgentAnswer(
            think=think,
            error="The answer has no <action>…</action> block.",
        )
    action_text = actions[-1].strip()
    try:
        action = parse_action(action_text, action_names)
    except ActionParseError as exc:
        return AgentAnswer(think=think, action_text=action_text, error=str(exc))
    return AgentAnswer(think=think, action_text=action_text, action=action)
