"""Spending limits: tokens and dollars per episode and per run.

The loop asks ``Budget.exceeded`` before every step, that is after the previous step's
model calls and before the next call; an episode over its limit, or in a run over its
limit, ends cleanly with termination ``budget`` (neither the agent's failure nor an
infrastructure fault). Within a step, the policy asks ``exceeded`` with the step's calls
so far before every re-ask, and makes none past a limit. A call is not interrupted, so
an episode may overshoot by one call, and a run by one call per episode running at once.

Costs use ``Prices`` from the filter settings (``Prices.of``) and its one formula
(``Prices.cost``): the numbers the cost gate and the bench report use. Tokens are the
records' tiktoken counts, as in the report.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.records import EpisodeSummary, LLMCall, StepRecord, TokenTotals
from linewise.settings import BudgetSettings, LinewiseSettings


def totals_cost(prices: Prices, tokens: TokenTotals) -> float:
    """Dollars for an episode's token totals."""
    return prices.cost(tokens.action_prompt, tokens.action_completion,
                       tokens.retriever_prompt, tokens.retriever_completion)


def call_cost(prices: Prices, call: LLMCall) -> float:
    """Dollars for one call: a retriever's at the retriever's prices, any other at the
    action model's."""
    if call.purpose == "retriever":
        return prices.cost(retriever_prompt=call.prompt_tokens,
                           retriever_completion=call.completion_tokens)
    return prices.cost(call.prompt_tokens, call.completion_tokens)


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
    """The limits of one episode and of the run it belongs to. A run builds one
    (``Budget.of``) and every episode of it checks and charges that one."""

    limits: BudgetSettings = field(default_factory=BudgetSettings)
    prices: Prices = field(default_factory=Prices)
    run: RunSpend = field(default_factory=RunSpend)

    @classmethod
    def of(cls, settings: LinewiseSettings) -> Budget:
        """A run's budget: its limits and prices from the settings, nothing spent yet."""
        return cls(settings.budget, Prices.of(settings.filter))

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
