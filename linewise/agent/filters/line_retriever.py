"""LineRetriever: a small LLM picks the line ranges that matter; the view is rebuilt.

Per step: the cost gate decides whether retrieval pays; the numbered tree is split
into windows that fit the retriever's context and queried concurrently (or, when only
part of the page changed since the last step, only the changed lines are asked about);
the answers' ranges are merged; the recall guard adds what must stay; and the view is
rendered either as kept lines with counted markers (``lines``) or as a valid smaller
tree with ancestors (``lines+structure``). A malformed answer is retried with the
error fed back; when retries run out the full tree is shown and the reason recorded.
"""

from __future__ import annotations

import asyncio
import difflib
import time
from typing import Any, Literal

import structlog
from pydantic import BaseModel, Field

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.agent.filters.retriever.cost_gate import CostGate, Prices
from linewise.agent.filters.retriever.defend import (
    InjectionMemory,
    defend_system,
    injection_ranges,
    without_injections,
)
from linewise.agent.filters.retriever.escalation import Escalation
from linewise.agent.filters.retriever.ranges_answer import (
    ranges_answer_format,
    ranges_constraint,
    ranges_reask,
)
from linewise.agent.filters.retriever.recall_guard import guard_lines, guarded_bids
from linewise.agent.filters.view.ranges import (
    Range,
    is_empty_answer,
    lines_of,
    merge_ranges,
    parse_ranges,
    ranges_of,
    raw_ranges,
)
from linewise.agent.filters.view.render import render_with_markers
from linewise.agent.filters.view.structure import rebuild_with_structure
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.models import ChatModel
from linewise.agent.structured import ask_structured, will_constrain
from linewise.axtree import bid_of
from linewise.errors import RangeParseError
from linewise.prompts import render_prompt
from linewise.records import LLMCall
from linewise.settings import DEFAULT_CONTEXT_TOKENS
from linewise.tokens import count_message_tokens, count_tokens, get_encoding

log = structlog.get_logger(__name__)

class LineRetrieverConfig(BaseModel):
    structure: bool = Field(default=True, description="lines+structure (True) or lines.")
    max_retries: int = Field(default=2, ge=0)
    context_tokens: int = Field(
        default=DEFAULT_CONTEXT_TOKENS, description="The retriever's context window."
    )
    answer_tokens: int = Field(default=512, description="Room left for the answer.")
    window_tokens: int | None = Field(
        default=None, description="Observation tokens per window (default: what fits)."
    )
    json_schema: Literal["auto", "on", "off"] = "auto"
    incremental: bool = True
    incremental_max_fraction: float = Field(
        default=0.5, description="Ask only about changed lines when they are at most this "
        "fraction of the tree's tokens."
    )
    cost_gate: bool = True
    prices: Prices = Field(default_factory=Prices)
    guard_subtree_lines: int = 3
    pad_lines: int = Field(
        default=1, ge=0, description="Widen every chosen range by this many lines on each "
        "side: small retrievers are often off by one line."
    )
    defend: bool = Field(
        default=False, description="Defender mode (agent/filters/retriever/defend.py): drop page "
        "text that addresses the agent; the cost gate never skips the retriever then."
    )


class _Selection(BaseModel):
    ranges: list[Range]
    calls: list[LLMCall]
    fallback_reason: str | None = None
    bid_aliases: int = Field(default=0, description="Lines added by reading numbers as bids.")
    injections: list[Range] = Field(default_factory=list)
    """Defender mode: ranges the retriever named as text addressing the agent."""


class LineRetrieverFilter:
    """The ``lines`` and ``lines+structure`` filters. One instance per episode: it keeps
    the previous step's selection for incremental retrieval and the cost gate's memory."""

    def __init__(self, model: ChatModel, config: LineRetrieverConfig | None = None) -> None:
        self.model = model
        self.config = config or LineRetrieverConfig()
        self.name = "lines+structure" if self.config.structure else "lines"
        # A defended view must come from the retriever: skipping it shows the injection.
        self.gate = CostGate(self.config.prices,
                             enabled=self.config.cost_gate and not self.config.defend)
        self.defense = InjectionMemory() if self.config.defend else None
        self._named: list[Range] = []
        self._previous: tuple[list[str], set[int]] | None = None
        # One level only: a whole-page pass cannot be made cheaper by showing "more", so
        # a stuck step is followed by the whole tree (and no incremental reuse after it).
        self.escalation = Escalation(max_level=1)

    async def apply(self, observation: FilterInput) -> FilterResult:
        result = await self._apply(observation)
        if self.defense is not None:
            named, self._named = self._named, []
            result = without_injections(observation, result, self.defense, named,
                                        structure=self.config.structure)
        self.escalation.shown(observation.lines, result.shown_bids)
        return result

    async def _apply(self, observation: FilterInput) -> FilterResult:
        started = time.perf_counter()
        lines = observation.lines
        tree = LineTree(lines)
        tokens_full = observation.full_tokens
        overhead = self._overhead_tokens(observation)
        decision = self.gate.decide(tokens_full, overhead, self.config.answer_tokens)
        notes: dict[str, object] = {"cost_gate": decision.model_dump()}
        escalation = self.escalation.update(observation)
        if escalation.reasons:
            notes["escalation"] = escalation.model_dump()
        if not decision.retrieve or not lines or escalation.level:
            self._previous = None
            return FilterResult(
                name=self.name, text=observation.text, kept_lines=list(range(1, len(lines) + 1)),
                shown_bids=observation.bids_on(range(1, len(lines) + 1)),
                tokens_full=tokens_full, tokens_shown=tokens_full,
                latency_ms=(time.perf_counter() - started) * 1000, notes=notes,
            )

        selection, reused = await self._select(observation, tokens_full, overhead, notes)
        if selection.fallback_reason is not None:
            self._previous = None
            return FilterResult(
                name=self.name, text=observation.text, kept_lines=list(range(1, len(lines) + 1)),
                shown_bids=observation.bids_on(range(1, len(lines) + 1)),
                calls=selection.calls, tokens_full=tokens_full, tokens_shown=tokens_full,
                fallback_reason=selection.fallback_reason,
                latency_ms=(time.perf_counter() - started) * 1000, notes=notes,
            )
        pad = self.config.pad_lines
        padded = merge_ranges(
            (max(1, lo - pad), min(len(lines), hi + pad)) for lo, hi in selection.ranges
        )
        chosen = {n - 1 for n in lines_of(padded)} | reused
        guarded = guard_lines(tree, observation, self.config.guard_subtree_lines) - chosen
        kept = chosen | guarded
        notes["guard_added_lines"] = sorted(i + 1 for i in guarded)
        if self.defense is not None:
            self._named = self.defense.remember(lines, selection.injections)
        notes["guarded_bids"] = guarded_bids(observation)
        context_lines: list[int] = []
        if self.config.structure:
            view = rebuild_with_structure(tree, kept)
            text = view.text
            context_lines = view.context_lines
            notes["context_lines"] = len(view.context_lines)
            notes["markers"] = view.markers
        else:
            text = render_with_markers(lines, sorted(k + 1 for k in kept))
        tokens_shown = count_tokens(text)
        self.gate.observe(tokens_shown / tokens_full if tokens_full else 1.0)
        self._previous = (list(lines), kept)
        return FilterResult(
            name=self.name, text=text, kept_lines=sorted(k + 1 for k in kept),
            context_lines=context_lines,
            shown_bids=observation.bids_on([*(k + 1 for k in kept), *context_lines]),
            ranges=selection.ranges, tokens_full=tokens_full, tokens_shown=tokens_shown,
            tokens_full_view=observation.stateless_tokens if self.config.structure else None,
            calls=selection.calls, latency_ms=(time.perf_counter() - started) * 1000,
            notes=notes,
        )

    # -- choosing what to ask about

    async def _select(
        self, observation: FilterInput, tokens_full: int, overhead: int, notes: dict[str, object]
    ) -> tuple[_Selection, set[int]]:
        """Ranges from the retriever, plus lines reused from the previous step (0-based)."""
        lines = observation.lines
        budget = self.config.window_tokens or max(
            256, self.config.context_tokens - self.config.answer_tokens - overhead
        )
        candidates = list(range(len(lines)))
        reused: set[int] = set()
        if self.config.incremental and self._previous is not None:
            changed, reused = _diff(self._previous, lines)
            changed_tokens = count_tokens("\n".join(lines[i] for i in changed))
            cheaper = changed_tokens <= self.config.incremental_max_fraction * tokens_full
            notes["incremental"] = {
                "changed_lines": len(changed), "changed_tokens": changed_tokens,
                "reused_lines": len(reused), "used": cheaper,
            }
            if cheaper:
                if not changed:
                    return _Selection(ranges=[], calls=[]), reused
                candidates = changed
            else:
                reused = set()
        windows = split_windows(lines, candidates, budget)
        notes["windows"] = len(windows)
        partial = len(candidates) < len(lines)
        results = await asyncio.gather(
            *(self._ask(observation, window, partial, len(windows) > 1 or partial)
              for window in windows)
        )
        calls = [call for result in results for call in result.calls]
        failures = [r.fallback_reason for r in results if r.fallback_reason]
        if len(failures) == len(results):
            return _Selection(ranges=[], calls=calls, fallback_reason="; ".join(failures)), set()
        if failures:
            # A window the retriever could not answer is shown whole; the others keep
            # their selection (one bad window must not cost the whole page its filter).
            notes["window_fallbacks"] = failures
        ranges = merge_ranges(
            r for window, result in zip(windows, results, strict=True)
            for r in (ranges_of(n + 1 for n in window) if result.fallback_reason
                      else result.ranges)
        )
        if not ranges and not reused:
            reason = "the retriever kept no line in any window"
            return _Selection(ranges=[], calls=calls, fallback_reason=reason), set()
        notes["bid_aliases"] = sum(r.bid_aliases for r in results)
        injections = [r for result in results for r in result.injections]
        return _Selection(ranges=ranges, calls=calls, injections=injections), reused

    # -- one retriever conversation

    async def _ask(
        self, observation: FilterInput, window: list[int], partial: bool, several: bool
    ) -> _Selection:
        """One retriever conversation about ``window`` (0-based lines); ``partial`` means the
        window holds only the lines that changed since the last step, ``several`` that
        other windows are asked too (so "nothing here", an empty list, is an answer)."""
        total = len(observation.lines)
        numbered = "\n".join(f"{i + 1}|{observation.lines[i]}" for i in window)
        if partial:
            scope = render_prompt("retriever_changed_scope.md")
        elif len(window) < total:
            scope = render_prompt(
                "retriever_window_scope.md", first=window[0] + 1, last=window[-1] + 1, total=total
            )
        else:
            scope = ""
        allowed = set(window)
        window_bids = {
            bid: i + 1 for i in window if (bid := bid_of(observation.lines[i])) is not None
        }

        def read(answer: str) -> _Selection:
            if several and is_empty_answer(answer):
                return _Selection(ranges=[], calls=[])  # nothing needed in this window
            aliased = _bid_aliases(
                raw_ranges(answer), window_bids, range(window[0] + 1, window[-1] + 2)
            )
            try:
                ranges = parse_ranges(answer, total)
            except RangeParseError:
                if not aliased:
                    raise
                ranges = []
            kept = {n for n in lines_of(ranges) if n - 1 in allowed} | aliased
            if not kept:
                raise RangeParseError("None of the chosen lines is among the lines shown to you.")
            injections = (
                [r for r in injection_ranges(answer, total)
                 if any(n - 1 in allowed for n in range(r[0], r[1] + 1))]
                if self.config.defend else []
            )
            return _Selection(ranges=merge_ranges((n, n) for n in kept), calls=[],
                              bid_aliases=len(aliased), injections=injections)

        result = await ask_structured(
            self.model,
            lambda constrained: self._messages(observation, numbered, scope, constrained),
            read, constraint=ranges_constraint(self.config.defend),
            mode=self.config.json_schema, reask=ranges_reask(total),
            retries=self.config.max_retries, purpose="retriever",
            max_tokens=self.config.answer_tokens,
        )
        if result.value is not None:
            return result.value.model_copy(update={"calls": result.calls})
        if result.failure is not None:
            reason = f"retriever failed: {result.failure}"
        else:
            reason = (f"no usable ranges after {self.config.max_retries + 1} tries: "
                      f"{result.error}")
        return _Selection(ranges=[], calls=result.calls, fallback_reason=reason)

    def _messages(
        self, observation: FilterInput, numbered: str, scope: str, use_schema: bool
    ) -> list[dict[str, Any]]:
        history = ("\n".join(a.text for a in observation.history) if observation.history
                   else "(no action yet)")
        answer_format = ranges_answer_format(use_schema, self.config.defend)
        user = render_prompt(
            "retriever_user.md", scope=f"\n{scope}" if scope else "",
            answer_format=answer_format.strip(), goal=observation.goal.strip(),
            history=history, observation=numbered,
        )
        system = render_prompt("retriever_system.md")
        if self.config.defend:
            system = defend_system(system)
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]

    def _overhead_tokens(self, observation: FilterInput) -> int:
        """Retriever prompt tokens besides the observation itself."""
        constrained = will_constrain(self.model, "json_schema", self.config.json_schema)
        return count_message_tokens(self._messages(observation, "", "", constrained))


def split_windows(lines: list[str], candidates: list[int], budget_tokens: int) -> list[list[int]]:
    """Group candidate lines (0-based, in order) into windows of at most ``budget_tokens``
    numbered-line tokens. A single line larger than the budget gets a window of its own."""
    if not candidates:
        return []
    encoding = get_encoding()
    sizes = encoding.encode_batch(
        [f"{i + 1}|{lines[i]}\n" for i in candidates], disallowed_special=()
    )
    windows: list[list[int]] = [[]]
    used = 0
    for index, tokens in zip(candidates, (len(s) for s in sizes), strict=True):
        if windows[-1] and used + tokens > budget_tokens:
            windows.append([])
            used = 0
        windows[-1].append(index)
        used += tokens
    return windows


def _bid_aliases(
    pairs: list[Range], window_bids: dict[str, int], window: range
) -> set[int]:
    """Lines (1-based) of the bids named by range bounds that cannot be line numbers here.

    Small retrievers often answer with the element id in brackets (``[142]``) instead of
    the line number in front of it. A bound outside the lines shown is read as a bid
    when one of the lines shown has that bid; a bound inside them stays a line number
    (reading those as bids too would add a line for almost every number on pages whose
    bids and line numbers overlap).
    """
    return {
        window_bids[str(n)] for pair in pairs for n in set(pair)
        if n not in window and str(n) in window_bids
    }


def _diff(previous: tuple[list[str], set[int]], lines: list[str]) -> tuple[list[int], set[int]]:
    """Lines that changed since the previous step (0-based, new numbering), and the
    previously kept lines that are unchanged, mapped to their new positions."""
    old_lines, old_kept = previous
    matcher = difflib.SequenceMatcher(None, old_lines, lines, autojunk=False)
    changed: list[int] = []
    reused: set[int] = set()
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            reused.update(j1 + k for k in range(i2 - i1) if i1 + k in old_kept)
        elif tag in ("replace", "insert"):
            changed.extend(range(j1, j2))
    return changed, reused
