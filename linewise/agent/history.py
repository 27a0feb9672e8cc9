"""One past step as the agent remembers it and filters and prompts read it: typed once,
where it is taken, not parsed again from its text by every reader."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from linewise.agent.action_parser import ParsedAction, parse_action
from linewise.axtree import AXLine
from linewise.errors import ActionParseError


class PastStep(BaseModel):
    """One past step: its thought, its action (as text and parsed), how it failed, and
    the page it was taken on. The agent's history holds these; a filter's input
    (``FilterInput.history``) shows it the same ones."""

    think: str | None = None
    action: str | None = Field(
        default=None, description="The action as shown in the prompt: canonical when it "
        "parsed, else the text the model wrote."
    )
    parsed: ParsedAction | None = Field(default=None, description="The action, when it parsed.")
    error: str | None = Field(default=None, description="Why it failed, when it did.")
    page_key: str = Field(default="", description="The page the action was taken on.")
    url: str = Field(default="", description="Its URL, fragment included.")
    target: AXLine | None = Field(
        default=None, description="The line of the element the action named first, as it "
        "was when the action was chosen.")
    target_after: AXLine | None = Field(
        default=None, description="The same element's line on the next page the agent saw "
        "(None: not known, or not shown).")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        """A bare string (a saved case's history, a caller's shorthand) is read as the
        action's text, and so is ``text`` (the field of ``PastAction``, the type filters
        were shown before this one; its ``name`` and ``bids`` come from the parse)."""
        if isinstance(data, str):
            return dict(cls.of_text(data))
        if isinstance(data, dict) and "text" in data and "action" not in data:
            return {**dict(cls.of_text(str(data["text"]), data.get("error"))),
                    **{k: v for k, v in data.items()
                       if k not in ("text", "name", "bids", "error")}}
        return data

    @classmethod
    def of_text(cls, text: str, error: str | None = None) -> PastStep:
        """The step of this action text, parsed once (``parsed`` stays None when it does
        not parse)."""
        try:
            parsed: ParsedAction | None = parse_action(text)
        except ActionParseError:
            parsed = None
        return cls(action=text, parsed=parsed, error=error)

    @property
    def text(self) -> str:
        """The action's text as filters read it ("" when the step has none)."""
        return self.action or ""

    @property
    def name(self) -> str | None:
        """The action's name, when it parsed."""
        return self.parsed.name if self.parsed is not None else None

    @property
    def bids(self) -> list[str]:
        """The elements the action named (none when it did not parse)."""
        return self.parsed.bids if self.parsed is not None else []


PastAction = PastStep
"""Deprecated: the name filters' past actions had before the agent's history and the
filter's input shared one type (``PastStep``, whose ``text``, ``name``, ``bids`` and
``error`` read as ``PastAction``'s did)."""
