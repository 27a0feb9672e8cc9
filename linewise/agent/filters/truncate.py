"""``none`` and ``truncate``: the full tree, and GenericAgent's bottom truncation."""

from __future__ import annotations

import time

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.tokens import count_tokens, get_encoding

TRUNCATION_MARKER = "… {n} more lines cut to fit {budget} tokens …"


class NoFilter:
    """The whole tree, as it is."""

    name = "none"

    async def apply(self, observation: FilterInput) -> FilterResult:
        every_line = range(1, len(observation.lines) + 1)
        return FilterResult(
            name=self.name,
            text=observation.text,
            kept_lines=list(every_line),
            shown_bids=observation.bids_on(every_line),
            tokens_full=observation.full_tokens,
            tokens_shown=observation.full_tokens,
        )


class TruncateFilter:
    """Keep lines from the top while they fit ``max_tokens``; say how many were cut.

    GenericAgent's behaviour (the paper ran 40,000 and 10,000 tokens): the top of the
    page survives, the bottom goes.
    """

    name = "truncate"

    def __init__(self, max_tokens: int) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be positive")
        self.max_tokens = max_tokens

    async def apply(self, observation: FilterInput) -> FilterResult:
        started = time.perf_counter()
        encoding = get_encoding()
        lines = observation.lines
        total = observation.full_tokens
        if total <= self.max_tokens:
            kept = len(lines)
        else:
            budget = self.max_tokens
            kept = 0
            used = 0
            sizes = encoding.encode_batch([line + "\n" for line in lines], disallowed_special=())
            for size in (len(s) for s in sizes):
                if used + size > budget:
                    break
                used += size
                kept += 1
        shown = lines[:kept]
        if kept < len(lines):
            shown = [*shown, TRUNCATION_MARKER.format(n=len(lines) - kept, budget=self.max_tokens)]
        text = "\n".join(shown)
        return FilterResult(
            name=self.name,
            text=text,
            kept_lines=list(range(1, kept + 1)),
            shown_bids=observation.bids_on(range(1, kept + 1)),
            ranges=[(1, kept)] if kept else [],
            tokens_full=total,
            tokens_shown=count_tokens(text) if kept < len(lines) else total,
            latency_ms=(time.perf_counter() - started) * 1000,
            notes={"max_tokens": self.max_tokens, "cut_lines": len(lines) - kept},
        )
