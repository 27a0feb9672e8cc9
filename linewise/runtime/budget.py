"""Spending limits: tokens and dollars per episode and per run.

The loop asks ``Budget.exceeded`` before every step, that is after the previous step's
model calls and before the next call; an episode over its limit, or in a run over its
limit, ends cleanly with termination ``budget`` (neither the agent's failure nor an
infrastructure fault). Within a step, the policy asks ``exceeded`` with the step's calls
so far before every re-ask, and makes none past a limit. A call is not interrupted, so
an episode may overshoot by one call, and a run by one call per episode running at once.

Costs use ``Prices`` from the filter settings (``prices_of``): the numbers the cost gate
and the bench report use. Tokens are the records' tiktoken counts, as in the report.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.records import EpisodeSummary, LLMCall, StepRecord, TokenTotals
from linewise.settings import BudgetSettings, FilterSettings


def prices_of(settings: FilterSettings) -> Prices:
    """The run's prices ($ per 1M tokens), from the filter settings."""
    return Prices(
        action_input=settings.price_action_input,
        action_output=settings.price_action_output,
        retriever_input=settings.price_retriever_input,
        retriever_output=settings.price_retriever_output,
    )


def totals_cost(prices: Prices, tokens: TokenTotals) -> float:
    """Dollars for an episode's token totals."""
    return (
        tokens.action_prompt * prices.action_input
        + tokens.action_completion * prices.action_output
        + tokens.retriever_prompt * prices.retriever_input
        + tokens.retriever_completion * prices.retriever_output
    ) / 1e6


def call_cost(prices: Prices, call: LLMCall) -> float:
    if call.purpose == "retriever":
        return (call.prompt_tokens * prices.retriever_input
                + call.completion_tokens * prices.retriever_output) / 1e6
    return (call.prompt_tokens * prices.action_input
            + call.completion_tokens * prices.action_output) / 1e6


@dataclass
class RunSpend:
    """What all episodes of one run (or one bench process) have spent so far; shared by
    the episodes, which may run concurrently (threads under BrowserGym)."""

    tokens: int = 0
    cost_usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, tokens: int, cost_usd: float) -> None:
        with self._lock:
            self.tokens += tokens
            self.cost_usd += cost_usd


@dataclass
class Budget:
    """The limits of one episode and of the run it belongs to."""

    limits: BudgetSettings = field(default_factory=BudgetSettings)
    prices: Prices = field(default_factory=Prices)
    run: RunSpend = field(default_factory=RunSpend)

    def charge(self, record: StepRecord) -> None:
        """Count a finished step's calls into the run's spend."""
        tokens = sum(c.prompt_tokens + c.completion_tokens for c in record.llm_calls)
        self.run.add(tokens, sum(call_cost(self.prices, c) for c in record.llm_calls))

    def run_exceeded(self, pending: Iterable[LLMCall] = ()) -> str | None:
        """Why the run may start no more model calls, or None (``pending``: as for
        ``exceeded``)."""
        limits = self.limits
        pending = list(pending)
        cost_usd = self.run.cost_usd + sum(call_cost(self.prices, c) for c in pending)
        tokens = self.run.tokens + sum(c.prompt_tokens + c.completion_tokens for c in pending)
        if limits.max_run_cost_usd is not None and cost_usd >= limits.max_run_cost_usd:
            return (f"run cost ${cost_usd:.4f} reached --max-run-cost "
                    f"${limits.max_run_cost_usd:g}")
        if limits.max_run_tokens is not None and tokens >= limits.max_run_tokens:
            return f"run tokens {tokens} reached --max-run-tokens {limits.max_run_tokens}"
        return None

    def exceeded(self, summary: EpisodeSummary, pending: Iterable[LLMCall] = ()) -> str | None:
        """Why this episode may make no more model calls, or None. ``pending``: calls of
        the running step, not yet in the summary (its re-asks ask before each call)."""
        limits = self.limits
        pending = list(pending)
        tokens = summary.tokens.model_copy()
        for call in pending:
            tokens.add(call)
        cost = totals_cost(self.prices, tokens)
        if limits.max_cost_usd is not None and cost >= limits.max_cost_usd:
            return f"episode cost ${cost:.4f} reached --max-cost ${limits.max_cost_usd:g}"
        if limits.max_tokens is not None and tokens.total >= limits.max_tokens:
            return (f"episode tokens {tokens.total} reached --max-tokens "
                    f"{limits.max_tokens}")
        return self.run_exceeded(pending)
