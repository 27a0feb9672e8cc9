"""When retrieval pays for itself (LineRetriever paper, Appendix B).

With ``C_L`` the action model's price per token and ``C_S`` the retriever's, retrieval
on an observation of ``|o|`` tokens costs ``C_S·(|o| + P) + C_S_out·A`` for the retriever
(``P``: its prompt overhead, ``A``: its answer) plus ``C_L·α·|o|`` for the action model,
against ``C_L·|o|`` without it. The paper's condition ``α ≤ (C_L − C_S) / C_L`` is the
large-page limit; the overhead terms are what make small observations not worth it.
``α`` is not known before retrieving, so the gate uses the mean kept fraction seen so
far (a prior until then).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from linewise.settings import FilterSettings


class Prices(BaseModel):
    """Dollars per million tokens. Defaults are the paper's (GPT-4.1 and 4.1-mini).

    The gate needs only the input prices and the retriever's output price; bench reports
    and budgets use ``action_output`` too, for the cost of whole episodes. ``cost`` is
    the one formula from tokens to dollars: a call's, an episode's and a bench's."""

    action_input: float = Field(default=2.0, ge=0)
    action_output: float = Field(default=8.0, ge=0)
    retriever_input: float = Field(default=0.4, ge=0)
    retriever_output: float = Field(default=1.6, ge=0)

    @classmethod
    def of(cls, settings: FilterSettings) -> Prices:
        """The run's prices, from the filter settings (``--price-…``)."""
        return cls(
            action_input=settings.price_action_input,
            action_output=settings.price_action_output,
            retriever_input=settings.price_retriever_input,
            retriever_output=settings.price_retriever_output,
        )

    def cost(self, action_prompt: int = 0, action_completion: int = 0,
             retriever_prompt: int = 0, retriever_completion: int = 0) -> float:
        """Dollars for these tokens of the action model and of the retriever."""
        return (
            action_prompt * self.action_input
            + action_completion * self.action_output
            + retriever_prompt * self.retriever_input
            + retriever_completion * self.retriever_output
        ) / 1e6


class GateDecision(BaseModel):
    retrieve: bool
    reason: str
    tokens_full: int
    expected_alpha: float
    alpha_threshold: float
    cost_without: float
    cost_with: float


class CostGate:
    """Decides per observation whether to retrieve, and learns the kept fraction."""

    def __init__(
        self, prices: Prices | None = None, prior_alpha: float = 0.5, enabled: bool = True
    ) -> None:
        self.prices = prices or Prices()
        self.prior_alpha = prior_alpha
        self.enabled = enabled
        self._alphas: list[float] = []

    @property
    def alpha_threshold(self) -> float:
        """The paper's bound: retrieval can only pay if α ≤ (C_L − C_S) / C_L."""
        c_l, c_s = self.prices.action_input, self.prices.retriever_input
        return (c_l - c_s) / c_l if c_l > 0 else 0.0

    @property
    def expected_alpha(self) -> float:
        if not self._alphas:
            return self.prior_alpha
        recent = self._alphas[-10:]
        return sum(recent) / len(recent)

    def observe(self, alpha: float) -> None:
        """Record the kept fraction of a retrieval that ran."""
        self._alphas.append(min(1.0, max(0.0, alpha)))

    def decide(self, tokens_full: int, overhead_tokens: int, answer_tokens: int) -> GateDecision:
        alpha = self.expected_alpha
        p = self.prices
        without = p.action_input * tokens_full
        with_retrieval = (
            p.retriever_input * (tokens_full + overhead_tokens)
            + p.retriever_output * answer_tokens
            + p.action_input * alpha * tokens_full
        )
        retrieve = with_retrieval < without
        if not self.enabled:
            retrieve, reason = True, "cost gate disabled"
        elif retrieve:
            reason = "retrieval is expected to cost less than showing the full tree"
        elif alpha > self.alpha_threshold:
            reason = (
                f"expected kept fraction {alpha:.2f} is above the break-even "
                f"{self.alpha_threshold:.2f} for these prices"
            )
        else:
            reason = f"observation of {tokens_full} tokens is too small to pay for retrieval"
        return GateDecision(
            retrieve=retrieve,
            reason=reason,
            tokens_full=tokens_full,
            expected_alpha=alpha,
            alpha_threshold=self.alpha_threshold,
            cost_without=without / 1e6,
            cost_with=with_retrieval / 1e6,
        )
