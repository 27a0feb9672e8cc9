"""A past step's action as filters and prompts read it: typed once, where it is taken,
not parsed again from its text by every reader."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from linewise.agent.action_parser import ParsedAction, parse_action
from linewise.errors import ActionParseError


class PastAction(BaseModel):
    """One past step's action."""

    text: str = Field(description="As the prompt shows it: canonical when it parsed, else "
                      "what the model wrote.")
    name: str | None = Field(default=None, description="The action's name, when it parsed.")
    bids: list[str] = Field(default_factory=list, description="The elements it named.")
    error: str | None = Field(default=None, description="Why it failed, when it did.")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        """A bare string (a saved case's history, a caller's shorthand) is read as the
        action's text."""
        if isinstance(data, str):
            return cls.of_text(data).model_dump()
        return data

    @classmethod
    def of_text(cls, text: str, error: str | None = None) -> PastAction:
        """The action of this text, parsed once (name and bids stay empty when it does
        not parse)."""
        try:
            parsed = parse_action(text)
        except ActionParseError:
            return cls.model_construct(text=text, name=None, bids=[], error=error)
        return cls.of(parsed, text, error)

    @classmethod
    def of(cls, parsed: ParsedAction | None, text: str, error: str | None = None
           ) -> PastAction:
        if parsed is None:
            return cls.model_construct(text=text, name=None, bids=[], error=error)
        return cls.model_construct(text=text, name=parsed.name, bids=parsed.bids, error=error)
