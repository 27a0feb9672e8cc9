"""Observation filters by name: what ``--filter NAME`` (run, bench, filter-eval) selects.

A filter is registered under a name with a *factory*: a function that receives a
``FilterContext`` (the filter settings, the retriever model if one was opened, an
embedder provider and the retriever's token limits) and returns a fresh
``ObservationFilter``. A fresh one per episode, since filters keep episode state.

    from linewise.agent.filters.registry import FilterContext, register_filter

    @register_filter("headings")
    def make_headings(context: FilterContext) -> HeadingsFilter:
        return HeadingsFilter(context.settings.max_obs_tokens)

The built-in filters are registered the same way, below. A package can also offer
filters without being imported by hand, through the ``linewise.filters`` entry-point
group; each entry point's name is the filter name and it points at the factory (or at
a ``FilterRegistration``, to declare ``needs_retriever``)::

    [project.entry-points."linewise.filters"]
    headings = "my_package.filters:make_headings"

Entry points are listed once, the first time a name is looked up, and one is imported
only when its filter is asked for.

A registration may be ``hidden``: a research variant that ``--filter`` accepts but the
lists a newcomer reads (``--help``, the unknown-name error, ``linewise filters``, the
table of docs/filters.md) leave out; ``filter_names(include_hidden=True)`` has them all. Its
``description`` is the one line those lists show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from typing import TYPE_CHECKING, overload

from linewise.agent.filters.stages.presets import PRESETS, FocusPreset, check_stages, get_preset
from linewise.errors import ConfigError
from linewise.settings import DEFAULT_CONTEXT_TOKENS, ENDPOINT_VIEW_BUDGET_TOKENS, FilterSettings

if TYPE_CHECKING:
    from linewise.agent.filters.base import ObservationFilter
    from linewise.agent.filters.focus import FocusConfig
    from linewise.agent.filters.focus_outline import ZoomMode
    from linewise.agent.models import ChatModel
    from linewise.agent.text.embedders import Embedder

# The filters themselves are imported by their factories, when an episode asks for one:
# this module is read to list and check the names (every `--filter` flag's help, the
# `--filter` argument), and the filters import the model clients, NumPy and the page
# code, which took seconds before a command's help appeared.


ENTRY_POINT_GROUP = "linewise.filters"

EmbedderProvider = Callable[[], "Embedder"]


@dataclass(frozen=True)
class FilterContext:
    """What a filter factory may build its filter from."""

    settings: FilterSettings = field(default_factory=FilterSettings)
    retriever: ChatModel | None = None
    """The retriever chat model; set when the filter's registration needs one."""
    embedder: EmbedderProvider | None = None
    """Gives the shared embedder (made on first use); None when none is configured."""
    retriever_context_tokens: int = DEFAULT_CONTEXT_TOKENS
    retriever_window_tokens: int | None = None
    view_budget_tokens: int = ENDPOINT_VIEW_BUDGET_TOKENS
    """The page tokens the action model is shown comfortably (``auto`` filters above it)."""

    def require_retriever(self, filter_name: str) -> ChatModel:
        if self.retriever is None:
            raise ConfigError(f"the {filter_name} filter needs a retriever model")
        return self.retriever

    def require_embedder(self, filter_name: str) -> Embedder:
        if self.embedder is None:
            raise ConfigError(f"the {filter_name} filter needs an embedder")
        return self.embedder()


FilterFactory = Callable[[FilterContext], "ObservationFilter"]
"""What is registered: context in, a fresh filter out."""

FilterMaker = Callable[[], "ObservationFilter"]
"""A factory bound to its context: what an episode calls for its own filter."""


SettingsCheck = Callable[[FilterSettings], bool]
"""Checks a filter's settings (a ConfigError when they are wrong) and says whether they
need the retriever."""


@dataclass(frozen=True)
class FilterRegistration:
    name: str
    factory: FilterFactory
    needs_retriever: bool = False
    """The runtime opens the retriever endpoint (or starts the embedded model) for it.
    With ``check_settings``: whether the default settings need it."""
    description: str = ""
    """One line: what the action model sees (``linewise filters``, docs/filters.md)."""
    hidden: bool = False
    """A research variant: accepted by ``--filter``, left out of the newcomer's lists."""
    check_settings: SettingsCheck | None = None
    """For a filter whose settings decide what it needs (``focus``): called when it is
    bound, before any episode."""

    def needs_retriever_for(self, settings: FilterSettings) -> bool:
        """Whether the filter, with these settings, needs the retriever."""
        if self.check_settings is not None:
            return self.check_settings(settings)
        return self.needs_retriever
    wants_retriever: bool = False
    """It uses a retriever when the run has a model endpoint anyway (the action model's,
    by default) and works without one (given models only, as in library tests)."""

    def bind(self, context: FilterContext) -> FilterMaker:
        """The per-episode maker, after checking that the context has what it needs."""
        if self.needs_retriever_for(context.settings):
            context.require_retriever(self.name)

        def make() -> ObservationFilter:
            return self.factory(context)

        return make


_registry: dict[str, FilterRegistration] = {}


@overload
def register_filter(
    name: str, factory: FilterFactory, *, needs_retriever: bool = ...,
    description: str = ..., hidden: bool = ..., check_settings: SettingsCheck | None = ...,
    replace: bool = ..., wants_retriever: bool = ...,
) -> FilterFactory: ...


@overload
def register_filter(
    name: str, factory: None = ..., *, needs_retriever: bool = ...,
    description: str = ..., hidden: bool = ..., check_settings: SettingsCheck | None = ...,
    replace: bool = ..., wants_retriever: bool = ...,
) -> Callable[[FilterFactory], FilterFactory]: ...


def register_filter(
    name: str,
    factory: FilterFactory | None = None,
    *,
    needs_retriever: bool = False,
    description: str = "",
    hidden: bool = False,
    check_settings: SettingsCheck | None = None,
    replace: bool = False,
    wants_retriever: bool = False,
) -> FilterFactory | Callable[[FilterFactory], FilterFactory]:
    """Register ``factory`` as the filter ``name``; without a factory, a decorator.

    ``description`` is the one line the filter lists show; ``hidden`` keeps a research
    variant out of them. Registering the same factory again is harmless; another
    factory under a taken name needs ``replace=True``.
    """
    if factory is None:
        def decorator(function: FilterFactory) -> FilterFactory:
            register_filter(name, function, needs_retriever=needs_retriever,
                            description=description, hidden=hidden,
                            check_settings=check_settings, replace=replace,
                            wants_retriever=wants_retriever)
            return function

        return decorator
    if not name or name != name.strip():
        raise ValueError(f"a filter name must be non-empty without surrounding space: {name!r}")
    existing = _registry.get(name)
    if existing is not None and existing.factory is not factory and not replace:
        raise ValueError(f"a filter named {name!r} is already registered")
    if existing is None or existing.factory is not factory or replace:
        _registry[name] = FilterRegistration(name, factory, needs_retriever, description,
                                             hidden, check_settings, wants_retriever)
    return factory


def unregister_filter(name: str) -> None:
    _registry.pop(name, None)


@cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def filter_names(*, include_hidden: bool = False, entry_points: bool = True) -> list[str]:
    """The names a newcomer is shown (``include_hidden``: every name ``--filter``
    accepts): registered ones in registration order, then entry points (shown unless
    their registration is hidden, which is known once they are loaded)."""
    names = [n for n, r in _registry.items() if include_hidden or not r.hidden]
    if not entry_points:
        return names
    return names + sorted(n for n in _entry_points() if n not in _registry)


def filter_registrations(*, include_hidden: bool = False,
                         entry_points: bool = True) -> list[FilterRegistration]:
    """The registrations of ``filter_names()``, entry points loaded."""
    return [get_filter(name) for name in filter_names(include_hidden=include_hidden,
                                                      entry_points=entry_points)]


def unknown_filter(name: str) -> ConfigError:
    """The error for a name no filter has: the public names, and where the rest are."""
    hidden = len(filter_names(include_hidden=True)) - len(filter_names())
    research = (f" (and {hidden} research variants: linewise filters --all)"
                if hidden else "")
    return ConfigError(
        f"unknown filter {name!r}; available: {', '.join(filter_names())}{research}"
    )


def get_filter(name: str) -> FilterRegistration:
    """The registration of ``name``; an entry point is imported the first time it is asked."""
    if name not in _registry and name in _entry_points():
        _load_entry_point(_entry_points()[name])
    try:
        return _registry[name]
    except KeyError:
        raise unknown_filter(name) from None


def check_filter_name(name: str) -> str:
    """``name`` if some filter has it, else a ConfigError listing the available ones."""
    if name not in _registry and name not in _entry_points():
        raise unknown_filter(name)
    return name


def _load_entry_point(entry: metadata.EntryPoint) -> None:
    try:
        loaded = entry.load()
    except Exception as exc:  # a broken plugin must name itself, whatever it raised
        raise ConfigError(
            f"filter {entry.name!r} (entry point {entry.value!r} in group "
            f"{ENTRY_POINT_GROUP}) failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    if isinstance(loaded, FilterRegistration):
        _registry[entry.name] = FilterRegistration(
            entry.name, loaded.factory, loaded.needs_retriever, loaded.description,
            loaded.hidden, loaded.check_settings,
        )
    elif callable(loaded):
        # Importing the module may already have registered it with the decorator (and its
        # needs_retriever); registering the same factory again keeps that registration.
        register_filter(entry.name, loaded)
    else:
        raise ConfigError(
            f"entry point {entry.value!r} ({ENTRY_POINT_GROUP}) is neither a filter "
            f"factory nor a FilterRegistration but {type(loaded).__name__}"
        )


def filter_maker(context: FilterContext) -> FilterMaker:
    """The per-episode maker of the filter ``context.settings.name`` names."""
    return get_filter(context.settings.name).bind(context)


def shared_embedder(settings: FilterSettings, api_key: str | None = None) -> EmbedderProvider:
    """An embedder provider for ``settings.embedding_*``: the embedder is made on the first
    call (loading an offline model takes seconds) and shared by every later one."""
    made: list[Embedder] = []

    def provide() -> Embedder:
        from linewise.agent.text.embedders import make_embedder
        from linewise.agent.text.learned import TrainedEmbedder

        if not made:
            if settings.retriever_weights is not None:
                made.append(TrainedEmbedder(settings.retriever_weights))
            else:
                made.append(make_embedder(
                    settings.embedding_base_url, settings.embedding_model, api_key=api_key
                ))
        return made[0]

    return provide


# The built-in filters, public ones first in the order a newcomer reads them.


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
        prices=Prices(
            action_input=settings.price_action_input,
            retriever_input=settings.price_retriever_input,
            retriever_output=settings.price_retriever_output,
        ),
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
            or settings.retriever_weights is not None)


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
    expander = QueryExpander(context.require_retriever(name), json_schema=settings.json_schema
                             ) if config.runs("expansion") else None
    model = context.require_retriever(name) if config.chooser == "model" else None
    return FocusFilter(model, config, embedder=embedder, name=name, expander=expander)


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
