"""The built-in observation filters, public ones first in the order a newcomer reads them.

Each is registered here with :func:`.registry.register_filter`, as a plugin would be;
the registry reads this module the first time a filter name is looked up. A factory
imports its filter when an episode asks for one: this module is read to list and check
the names (every ``--filter`` flag's help), and the filters import the model clients,
NumPy and the page code.

A new filter: its module, one ``register_filter`` call here (with a one-line
``description``), and its test (docs/design.md, "A new observation filter").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from linewise.agent.filters.registry import (
    FilterContext,
    FilterFactory,
    register_filter,
    trained_embedder,
)
from linewise.agent.filters.stages.presets import PRESETS, FocusPreset, check_stages, get_preset
from linewise.errors import ConfigError
from linewise.settings import FilterSettings

if TYPE_CHECKING:
    from linewise.agent.filters.base import ObservationFilter
    from linewise.agent.filters.focus import FocusConfig
    from linewise.agent.filters.focus_outline import ZoomMode


def _line_retriever(context: FilterContext, *, structure: bool) -> ObservationFilter:
    from linewise.agent.filters.line_retriever import LineRetrieverConfig, LineRetrieverFilter
    from linewise.agent.filters.retriever.cost_gate import Prices

    settings = context.settings
    config = LineRetrieverConfig(
        structure=structure,
        context_tokens=context.retriever_context_tokens,
        window_tokens=context.retriever_window_tokens,
        json_schema=settings.json_schema,
        incremental=settings.incremental,
        cost_gate=settings.cost_gate,
        defend=settings.defend,
        prices=Prices.of(settings),
    )
    name = "lines+structure" if structure else "lines"
    return LineRetrieverFilter(context.require_retriever(name), config)


def _embedding(context: FilterContext) -> ObservationFilter:
    from linewise.agent.filters.embedding import EmbeddingFilter

    return EmbeddingFilter(
        context.require_embedder("embedding"), top_k=context.settings.embedding_top_k
    )


def _embedder_configured(settings: FilterSettings) -> bool:
    return (settings.embedding_base_url is not None or settings.embedding_model is not None
            or trained_embedder(settings))


def focus_config(settings: FilterSettings, preset: FocusPreset | None = None) -> FocusConfig:
    """The ``focus`` filter's configuration: ``preset`` (a research alias's), else the
    settings' ``focus_preset`` with their ``focus_stages`` instead of its stages when
    set; an unknown preset or stage is a ConfigError listing the valid ones."""
    from linewise.agent.filters.focus import FocusConfig

    chosen = preset if preset is not None else get_preset(settings.focus_preset)
    stages = chosen.stages
    if preset is None and settings.focus_stages is not None:
        stages = check_stages(settings.focus_stages)
    return FocusConfig(
        stages=stages, chooser=chosen.chooser, items=chosen.items,
        reserve_share=chosen.reserve_share,
        budget_tokens=settings.focus_budget_tokens, json_schema=settings.json_schema,
        incremental=settings.incremental, embedding_top_k=settings.embedding_top_k,
        defend=settings.defend,
    )


def _asks_the_retriever(chooser: str, stages: tuple[str, ...]) -> bool:
    """Whether a focus configuration (its chooser and stages) asks the retriever."""
    return chooser == "model" or "expansion" in stages


def _check_focus(settings: FilterSettings) -> bool:
    """``focus``'s settings are valid (ConfigError else); whether they need the retriever."""
    config = focus_config(settings)
    if config.defend and config.chooser != "model":
        raise ConfigError(
            "--defend needs the retriever to read the page: use a focus preset whose "
            "retriever chooses (" + ", ".join(
                n for n, p in PRESETS.items() if p.chooser == "model") + ")"
        )
    return _asks_the_retriever(config.chooser, config.stages)


def _focus(context: FilterContext, preset: FocusPreset | None = None,
           name: str = "focus") -> ObservationFilter:
    return _focus_filter(context, focus_config(context.settings, preset), name)


def _focus_filter(context: FilterContext, config: FocusConfig, name: str) -> ObservationFilter:
    """A focus filter of ``config``, with the embedder, expander and retriever its stages
    and chooser ask for."""
    from linewise.agent.filters.focus import FocusFilter
    from linewise.agent.filters.stages.query_expansion import QueryExpander

    settings = context.settings
    # The chunk embedding stage runs only where an embedder was chosen: the offline one
    # costs seconds per large page on a small machine. The units stage asks for one
    # (the offline one by default).
    wants_embedder = config.runs("units") or (
        config.runs("embedding") and _embedder_configured(settings))
    embedder = context.require_embedder(name) if wants_embedder else None
    reranker = context.reranker() if context.reranker and config.runs("units") else None
    expander = QueryExpander(context.require_retriever(name), json_schema=settings.json_schema
                             ) if config.runs("expansion") else None
    model = context.require_retriever(name) if config.chooser == "model" else None
    return FocusFilter(model, config, embedder=embedder, name=name, expander=expander,
                       reranker=reranker)


def _focus_alias(preset: FocusPreset) -> FilterFactory:
    name = f"focus-{preset.name}"
    return lambda context: _focus(context, preset, name)


AUTO_ESCALATION = (2, 4)
"""``auto``'s escalation levels, as multiples of the view budget."""


def _auto(context: FilterContext) -> ObservationFilter:
    """``auto``: the whole tree when it fits the action model's view budget; a larger one
    through ``focus`` (its preset and stages) down to that budget. The retriever's stages
    run when the run has one. When the agent is stuck, the view grows to every candidate
    within twice, then four times the view budget: the whole tree of a documentation page
    would take a small model many minutes to read, and the prompt fit would cut it."""
    budget = max(500, context.view_budget_tokens)
    config = focus_config(context.settings).model_copy(
        update={"min_page_tokens": budget, "view_budget_tokens": budget,
                "escalation_budgets": tuple(n * budget for n in AUTO_ESCALATION)})
    if context.retriever is None:
        config = config.model_copy(update={
            "stages": tuple(s for s in config.stages if s != "expansion"), "chooser": "none"})
    return _focus_filter(context, config, "auto")


def _check_auto(settings: FilterSettings) -> bool:
    """``focus``'s settings are valid; ``auto`` never needs a retriever (it wants one)."""
    _check_focus(settings)
    return False


register_filter(
    "auto", _auto, wants_retriever=True, check_settings=_check_auto,
    description="the whole tree when it fits the action model's view budget "
    "(`--view-budget`), else `focus` down to that budget; more when the agent is stuck",
)
def _none(context: FilterContext) -> ObservationFilter:
    from linewise.agent.filters.truncate import NoFilter

    return NoFilter()


def _truncate(context: FilterContext) -> ObservationFilter:
    from linewise.agent.filters.truncate import TruncateFilter

    return TruncateFilter(context.settings.max_obs_tokens)


def _bm25(context: FilterContext) -> ObservationFilter:
    from linewise.agent.filters.bm25 import BM25Filter

    return BM25Filter()


_DEFAULT_FOCUS = get_preset(FilterSettings().focus_preset)
"""The preset ``focus`` runs by default (with its own stages: the default settings name
none)."""

register_filter("none", _none, description="the full AXTree")
register_filter(
    "truncate", _truncate,
    description="GenericAgent's bottom truncation to `--max-obs-tokens` (default 40,000), "
    "with a marker saying how many lines were cut",
)
register_filter(
    "focus", _focus,
    needs_retriever=_asks_the_retriever(_DEFAULT_FOCUS.chooser, _DEFAULT_FOCUS.stages),
    check_settings=lambda settings: _check_focus(settings),
    description="candidates, then (by preset) a choice: the configured stages propose "
    "lines until a fixed token budget is full; the view is those lines or the retriever's "
    "choice among them (by preset with their enclosing items) and the guarded elements, "
    "as a valid smaller tree. Configured by `--focus-preset` and `--focus-stages`",
)
register_filter(
    "lines", lambda context: _line_retriever(context, structure=False), needs_retriever=True,
    description="LineRetriever: a small LLM picks line ranges of the numbered tree; kept "
    "lines are copied, each run of dropped lines becomes one counted marker",
)
register_filter(
    "lines+structure", lambda context: _line_retriever(context, structure=True),
    needs_retriever=True, description="the same selection rebuilt as a valid smaller "
    "tree: kept lines, their ancestors (bid, role, short name) at their indentation, one "
    "counted marker per run of dropped siblings",
)
register_filter(
    "bm25", _bm25, description="BM25 line hits on goal, recent "
    "actions and thoughts (pure Python, milliseconds): the 20 best ± 2 lines, as a valid "
    "smaller tree. Strong when the goal names the element, weak on paraphrases",
)
register_filter(
    "embedding", _embedding, description="the paper's embedding baseline: 100-token chunks "
    "ranked by cosine similarity to goal + history, the 10 best in page order",
)

# Research variants: each focus preset under its measured name (benchmarks/NOTES.md).
for _preset in PRESETS.values():
    register_filter(
        f"focus-{_preset.name}", _focus_alias(_preset),
        needs_retriever=_asks_the_retriever(_preset.chooser, _preset.stages),
        hidden=True, description=f"`focus --focus-preset {_preset.name}`: {_preset.description}",
    )


def _focus_outline(context: FilterContext, *, zoom: ZoomMode, name: str) -> ObservationFilter:
    from linewise.agent.filters.focus import FocusConfig
    from linewise.agent.filters.focus_outline import OutlineFirstFilter

    settings = context.settings
    embedder = context.require_embedder(name) if _embedder_configured(settings) else None
    config = FocusConfig(
        budget_tokens=settings.focus_budget_tokens, json_schema=settings.json_schema,
        incremental=settings.incremental, embedding_top_k=settings.embedding_top_k,
    )
    return OutlineFirstFilter(context.require_retriever(name), config, embedder,
                              zoom=zoom, name=name)


register_filter(
    "focus-outline", lambda context: _focus_outline(context, zoom="candidates",
                                                    name="focus-outline"),
    needs_retriever=True, hidden=True, description="the retriever picks sections and items "
    "from a compact outline; the candidates inside them are kept, with their items",
)
register_filter(
    "focus-outline-zoom", lambda context: _focus_outline(context, zoom="model",
                                                         name="focus-outline-zoom"),
    needs_retriever=True, hidden=True, description="focus-outline with a second call that "
    "picks the lines inside the chosen sections",
)
