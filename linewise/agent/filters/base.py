"""The interface every observation filter implements, and the records it produces."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

from pydantic import BaseModel, Field, PrivateAttr

from linewise.agent.filters.view.render import line_ranges, render_with_markers
from linewise.agent.history import PastStep
from linewise.axtree import bid_of, without_state
from linewise.records import FilterRecord, LLMCall
from linewise.tokens import count_tokens


class FilterInput(BaseModel):
    """What a filter may look at for one step."""

    goal: str
    lines: list[str] = Field(description="The AXTree lines; line n (1-based) is lines[n-1].")
    history: list[PastStep] = Field(
        default_factory=list, description="Past steps, oldest first: the agent's own "
        "history (a string is read as an action's text)."
    )
    thoughts: list[str] = Field(default_factory=list, description="Past thoughts, oldest first.")
    focused_bid: str = ""
    last_action_error: str | None = None
    must_keep_bids: list[str] = Field(
        default_factory=list,
        description="Bids the recall guard keeps whatever the filter says "
        "(named by the last actions, or the element the last action failed on).",
    )
    tokens_full: int | None = Field(
        default=None,
        description="Tokens of the whole tree, counted once per step by the loop; "
        "counted on first use when not given.",
    )
    _stateless_tokens: int | None = PrivateAttr(default=None)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def full_tokens(self) -> int:
        """Tokens of the whole tree (``tokens_full``, or counted now)."""
        if self.tokens_full is None:
            self.tokens_full = count_tokens(self.text)
        return self.tokens_full

    @property
    def stateless_tokens(self) -> int:
        """Tokens of the whole tree with every line as a structure-preserving view shows
        it (without its state: ``axtree.without_state``): what such a view's cut is
        measured against, so that dropping ``url=`` and ``focused`` is not counted as
        lines the filter cut. Counted once per step."""
        if self._stateless_tokens is None:
            self._stateless_tokens = count_tokens(
                "\n".join(without_state(line) for line in self.lines))
        return self._stateless_tokens

    def keep(self, name: str, line_numbers: Iterable[int], **notes: object) -> FilterResult:
        """The view that shows these 1-based lines, each run of dropped lines replaced by
        one counted marker: the result a simple filter returns."""
        kept = sorted({n for n in line_numbers if 1 <= n <= len(self.lines)})
        text = render_with_markers(self.lines, kept)
        return FilterResult(
            name=name,
            text=text,
            kept_lines=kept,
            shown_bids=self.bids_on(kept),
            ranges=line_ranges(kept),
            tokens_full=self.full_tokens,
            tokens_shown=count_tokens(text) if len(kept) < len(self.lines) else self.full_tokens,
            notes=dict(notes),
        )

    def bids_on(self, line_numbers: Iterable[int]) -> list[str]:
        """The bids of these 1-based lines, in page order (lines without a bid skipped)."""
        found: list[str] = []
        for number in sorted(set(line_numbers)):
            if 1 <= number <= len(self.lines):
                bid = bid_of(self.lines[number - 1])
                if bid:
                    found.append(bid)
        return found


class FilterResult(BaseModel):
    """The view a filter built, and what it kept and cost."""

    name: str
    text: str = Field(description="The observation shown to the action model.")
    kept_lines: list[int] = Field(
        default_factory=list, description="1-based numbers of the original lines kept."
    )
    context_lines: list[int] = Field(
        default_factory=list,
        description="1-based numbers of lines shown shortened, as context of kept lines "
        "(their ancestors).",
    )
    shown_bids: list[str] = Field(
        default_factory=list,
        description="Every bid the view shows, on kept or context lines.",
    )
    ranges: list[tuple[int, int]] = Field(
        default_factory=list, description="Inclusive line ranges chosen (before any guard)."
    )
    tokens_full: int = 0
    tokens_shown: int = 0
    tokens_full_view: int | None = Field(
        default=None, description="Tokens of the whole tree rendered as this view renders "
        "its lines (a structure-preserving view shows them without their state); the "
        "baseline of the cut. None: the tree as given (tokens_full).")
    latency_ms: float = 0.0
    calls: list[LLMCall] = Field(default_factory=list, description="Retriever LLM calls.")
    fallback_reason: str | None = Field(
        default=None, description="Why the full tree was shown instead, if it was."
    )
    notes: dict[str, object] = Field(
        default_factory=dict, description="Filter-specific decisions (cost gate, windows…)."
    )

    def record(self, total_lines: int, misses: list[str] | None = None) -> FilterRecord:
        """What the trace keeps of this result for one step."""
        return FilterRecord(
            name=self.name,
            ranges=self.ranges,
            kept_lines=len(self.kept_lines),
            kept_ranges=line_ranges(self.kept_lines),
            context_lines=self.context_lines,
            total_lines=total_lines,
            tokens_full=self.tokens_full,
            tokens_shown=self.tokens_shown,
            tokens_full_view=self.tokens_full_view,
            reduction=self.reduction,
            latency_ms=self.latency_ms,
            retriever_prompt_tokens=sum(c.prompt_tokens for c in self.calls),
            retriever_completion_tokens=sum(c.completion_tokens for c in self.calls),
            fallback_reason=self.fallback_reason,
            misses=misses or [],
            notes=self.notes,
        )

    @property
    def reduction(self) -> float:
        """1 - |filtered| / |full| in tokens, as in the LineRetriever paper, with the full
        tree rendered as the view renders lines (``tokens_full_view``): the tokens the
        filter cut by leaving lines out, not by showing the ones it kept differently. A
        view that keeps every line cuts nothing (never below 0: markers and context
        lines can make a view longer than its baseline)."""
        full = self.tokens_full_view if self.tokens_full_view is not None else self.tokens_full
        if full <= 0:
            return 0.0
        return max(0.0, 1.0 - self.tokens_shown / full)


class ObservationFilter(Protocol):
    """Something that shrinks an observation. ``name`` is what ``--filter`` selects."""

    name: str

    async def apply(self, observation: FilterInput) -> FilterResult: ...


_ACTION_BID = re.compile(r"\(\s*['\"][A-Za-z0-9]+['\"]")


def query_text(observation: FilterInput, recent: int = 3) -> str:
    """Goal, the last ``recent`` actions (without their bids) and thoughts, as one query:
    what the lexical and embedding filters and stages rank lines by."""
    actions = [_ACTION_BID.sub("(", a.text) for a in observation.history[-recent:]]
    return "\n".join([observation.goal, *actions, *observation.thoughts[-recent:]])
