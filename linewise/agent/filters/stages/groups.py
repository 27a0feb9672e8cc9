"""What a focus stage proposes (``Group``) and what the budget took (``CandidateSet``)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CandidateSet", "Group"]


@dataclass(frozen=True)
class Group:
    stage: str
    lines: tuple[int, ...]
    """0-based indices, ascending."""


@dataclass
class CandidateSet:
    lines: set[int] = field(default_factory=set)
    """0-based indices of every line taken."""
    by_stage: dict[str, list[int]] = field(default_factory=dict)
    """1-based numbers of the lines each stage brought in first."""
    tokens: int = 0
    """Numbered-line tokens of the lines taken."""
    top_lexical: list[int] = field(default_factory=list)
    """0-based lines of the best lexical and expanded-query groups (kept in the view
    whatever the model says)."""
    order: list[int] = field(default_factory=list)
    """0-based lines in the order they were taken (the guard's, then the stages' turns)."""
    ran: list[str] = field(default_factory=list)
    """The stages that proposed groups this step (set by the filter; those that ran but
    brought no new line are here and not in ``by_stage``)."""
    groups: list[Group] = field(default_factory=list)
    """The groups taken, in the order they were taken (each stage's best first)."""
