"""Building the filter that ``--filter NAME`` selects, one instance per episode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from linewise.agent.filters.base import ObservationFilter
from linewise.agent.filters.cost_gate import Prices
from linewise.agent.filters.line_retriever import LineRetrieverConfig, LineRetrieverFilter
from linewise.agent.filters.truncate import NoFilter, TruncateFilter
from linewise.agent.models import ChatModel
from linewise.settings import FilterSettings

FilterFactory = Callable[[], ObservationFilter]


def filter_factory(
    settings: FilterSettings,
    retriever: ChatModel | None = None,
    *,
    retriever_context_tokens: int = 32768,
    retriever_window_tokens: int | None = None,
    embedder: Any = None,
) -> FilterFactory:
    """A function that makes a fresh filter for each episode (filters keep episode state)."""
    name = settings.name
    if name == "none":
        return NoFilter
    if name == "truncate":
        return lambda: TruncateFilter(settings.max_obs_tokens)
    if name == "embedding":
        from linewise.agent.filters.embedding import EmbeddingFilter

        if embedder is None:
            raise ValueError("the embedding filter needs an embedder")
        return lambda: EmbeddingFilter(embedder, top_k=settings.embedding_top_k)
    if retriever is None:
        raise ValueError(f"the {name} filter needs a retriever model")
    config = LineRetrieverConfig(
        structure=name == "lines+structure",
        context_tokens=settings.retriever_context_tokens or retriever_context_tokens,
        window_tokens=settings.retriever_window_tokens or retriever_window_tokens,
        json_schema=settings.json_schema,  # type: ignore[arg-type]
        incremental=settings.incremental,
        cost_gate=settings.cost_gate,
        prices=Prices(
            action_input=settings.price_action_input,
            retriever_input=settings.price_retriever_input,
            retriever_output=settings.price_retriever_output,
        ),
    )
    return lambda: LineRetrieverFilter(retriever, config)
