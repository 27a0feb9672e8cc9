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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from typing import overload

from linewise.agent.filters.base import ObservationFilter
from linewise.agent.filters.bm25 import BM25Filter
from linewise.agent.filters.cost_gate import Prices
from linewise.agent.filters.embedders import Embedder, make_embedder
from linewise.agent.filters.embedding import EmbeddingFilter
from linewise.agent.filters.focus import FocusConfig, FocusFilter
from linewise.agent.filters.focus_outline import OutlineFirstFilter, ZoomMode
from linewise.agent.filters.line_retriever import LineRetrieverConfig, LineRetrieverFilter
from linewise.agent.filters.query_expansion import QueryExpander
from linewise.agent.filters.truncate import NoFilter, TruncateFilter
from linewise.agent.models import ChatModel
from linewise.errors import ConfigError
from linewise.settings import DEFAULT_CONTEXT_TOKENS, ENDPOINT_VIEW_BUDGET_TOKENS, FilterSettings

ENTRY_POINT_GROUP = "linewise.filters"

EmbedderProvider = Callable[[], Embedder]


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


FilterFactory = Callable[[FilterContext], ObservationFilter]
"""What is registered: context in, a fresh filter out."""

FilterMaker = Callable[[], ObservationFilter]
"""A factory bound to its context: what an episode calls for its own filter."""


@dataclass(frozen=True)
class FilterRegistration:
    name: str
    factory: FilterFactory
    needs_retriever: bool = False
    """The runtime opens the retriever endpoint (or starts the embedded model) for it."""
    description: str = ""
    wants_retriever: bool = False
    """It uses a retriever when the run has a model endpoint anyway (the action model's,
    by default) and works without one (given models only, as in library tests)."""

    def bind(self, context: FilterContext) -> FilterMaker:
        """The per-episode maker, after checking that the context has what it needs."""
        if self.needs_retriever:
            context.require_retriever(self.name)

        def make() -> ObservationFilter:
            return self.factory(context)

        return make


_registry: dict[str, FilterRegistration] = {}


@overload
def register_filter(
    name: str, factory: FilterFactory, *, needs_retriever: bool = ...,
    description: str = ..., replace: bool = ..., wants_retriever: bool = ...,
) -> FilterFactory: ...


@overload
def register_filter(
    name: str, factory: None = ..., *, needs_retriever: bool = ...,
    description: str = ..., replace: bool = ..., wants_retriever: bool = ...,
) -> Callable[[FilterFactory], FilterFactory]: ...


def register_filter(
    name: str,
    factory: FilterFactory | None = None,
    *,
    needs_retriever: bool = False,
    description: str = "",
    replace: bool = False,
    wants_retriever: bool = False,
) -> FilterFactory | Callable[[FilterFactory], FilterFactory]:
    """Register ``factory`` as the filter ``name``; without a factory, a decorator.

    Registering the same factory again is harmless; another factory under a taken name
    needs ``replace=True``.
    """
    if factory is None:
        def decorator(function: FilterFactory) -> FilterFactory:
            register_filter(name, function, needs_retriever=needs_retriever,
                            description=description, replace=replace,
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
                                             wants_retriever)
    return factory


def unregister_filter(name: str) -> None:
    _registry.pop(name, None)


@cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def filter_names() -> list[str]:
    """Every name ``--filter`` accepts: registered ones first, then entry points."""
    names = list(_registry)
    return names + sorted(n for n in _entry_points() if n not in _registry)


def get_filter(name: str) -> FilterRegistration:
    """The registration of ``name``; an entry point is imported the first time it is asked."""
    if name not in _registry and name in _entry_points():
        _load_entry_point(_entry_points()[name])
    try:
        return _registry[name]
    except KeyError:
        raise ConfigError(
            f"unknown filter {name!r}; available: {', '.join(filter_names())}"
        ) from None


def check_filter_name(name: str) -> str:
    """``name`` if some filter has it, else a ConfigError listing the available ones."""
    if name not in _registry and name not in _entry_points():
        raise ConfigError(f"unknown filter {name!r}; available: {', '.join(filter_names())}")
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
            entry.name, loaded.factory, loaded.needs_retriever, loaded.description
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
        if not made:
            made.append(make_embedder(
                settings.embedding_base_url, settings.embedding_model, api_key=api_key
            ))
        return made[0]

    return provide


# The built-in filters.


def _line_retriever(context: FilterContext, *, structure: bool) -> ObservationFilter:
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
    return EmbeddingFilter(
        context.require_embedder("embedding"), top_k=context.settings.embedding_top_k
    )


def _auto(context: FilterContext) -> ObservationFilter:
    """``auto``: the whole tree when it fits the action model's view budget; a larger one
    through the focus stages (with query expansion when the run has a model, and the
    embedding of the page's blocks), down to that budget. Escalation when the agent is
    stuck is the focus filter's."""
    settings = context.settings
    budget = max(500, context.view_budget_tokens)
    config = FocusConfig(
        budget_tokens=settings.focus_budget_tokens, json_schema=settings.json_schema,
        incremental=settings.incremental, embedding_top_k=settings.embedding_top_k,
        defend=settings.defend, items=True, embedding_units=True,
        min_page_tokens=budget, view_budget_tokens=budget,
    )
    expander = (QueryExpander(context.retriever, json_schema=settings.json_schema)
                if context.retriever is not None else None)
    embedder = context.embedder() if context.embedder is not None else None
    return FocusFilter(None, config, embedder=embedder, name="auto", expander=expander)


register_filter(
    "auto", _auto, wants_retriever=True,
    description="the whole tree when it fits the action model's view budget, else the "
    "focus stages down to it; more when the agent is stuck",
)
register_filter("none", lambda context: NoFilter(), description="the full AXTree")
register_filter(
    "truncate", lambda context: TruncateFilter(context.settings.max_obs_tokens),
    description="GenericAgent's bottom truncation to max_obs_tokens",
)
register_filter("embedding", _embedding, description="top-k chunks by embedding similarity")
register_filter(
    "lines", lambda context: _line_retriever(context, structure=False), needs_retriever=True,
    description="LineRetriever: kept lines with counted markers",
)
register_filter(
    "lines+structure", lambda context: _line_retriever(context, structure=True),
    needs_retriever=True, description="LineRetriever: a valid smaller tree",
)


def _focus(context: FilterContext, *, model: bool = True, items: bool = False,
           units: bool = False, expand: bool = False, name: str = "") -> ObservationFilter:
    settings = context.settings
    # The embedding stage runs only where an embedder was chosen (or the filter is the
    # one that embeds units): the offline one costs seconds per large page on a small
    # machine.
    configured = settings.embedding_base_url is not None or settings.embedding_model is not None
    embedder = context.require_embedder(name or "focus") if configured or units else None
    config = FocusConfig(
        budget_tokens=settings.focus_budget_tokens, json_schema=settings.json_schema,
        incremental=settings.incremental, embedding_top_k=settings.embedding_top_k,
        defend=settings.defend,
        items=items, embedding_units=units,
    )
    expander = QueryExpander(context.require_retriever(name), json_schema=settings.json_schema
                             ) if expand else None
    if not model:
        return FocusFilter(None, config, embedder=embedder, name=name or "focus-candidates",
                           expander=expander)
    return FocusFilter(context.require_retriever("focus"), config, embedder=embedder,
                       name=name or "focus", expander=expander)


register_filter(
    "bm25", lambda context: BM25Filter(), description="BM25 line hits on goal, history and "
    "thoughts, with context, as a valid smaller tree",
)
register_filter(
    "focus", _focus, needs_retriever=True, description="cheap stages propose candidate "
    "lines; the retriever chooses among them within a fixed token budget",
)
register_filter(
    "focus-candidates", lambda context: _focus(context, model=False),
    description="focus without the retriever: the candidate lines themselves",
)
register_filter(
    "focus-items", lambda context: _focus(context, items=True, name="focus-items"),
    needs_retriever=True, description="focus, each chosen line with its enclosing item "
    "(article, row, list item, term and definition, form group, section)",
)
register_filter(
    "focus-candidates-items",
    lambda context: _focus(context, model=False, items=True, name="focus-candidates-items"),
    description="focus-candidates, each candidate with its enclosing item, in the order "
    "the stages proposed them, within the view budget",
)

register_filter(
    "focus-candidates-units",
    lambda context: _focus(context, model=False, items=True, units=True,
                           name="focus-candidates-units"),
    description="focus-candidates-items with an embedding stage that scores the page's "
    "blocks with their context (term, heading, row); uses the embedder",
)

register_filter(
    "focus-expand-items",
    lambda context: _focus(context, model=False, items=True, expand=True,
                           name="focus-expand-items"),
    needs_retriever=True, description="focus-candidates-items with one more stage: the "
    "retriever reads only the goal and history and names the words the needed element "
    "is likely to show, which are matched against every line",
)
register_filter(
    "focus-expand-units",
    lambda context: _focus(context, model=False, items=True, units=True, expand=True,
                           name="focus-expand-units"),
    needs_retriever=True, description="focus-expand-items with focus-candidates-units' "
    "embedding stage",
)


def _focus_outline(context: FilterContext, *, zoom: ZoomMode, name: str) -> ObservationFilter:
    settings = context.settings
    configured = settings.embedding_base_url is not None or settings.embedding_model is not None
    embedder = context.require_embedder(name) if configured else None
    config = FocusConfig(
        budget_tokens=settings.focus_budget_tokens, json_schema=settings.json_schema,
        incremental=settings.incremental, embedding_top_k=settings.embedding_top_k,
    )
    return OutlineFirstFilter(context.require_retriever(name), config, embedder,
                              zoom=zoom, name=name)


register_filter(
    "focus-outline", lambda context: _focus_outline(context, zoom="candidates",
                                                    name="focus-outline"),
    needs_retriever=True, description="the retriever picks sections and items from a "
    "compact outline; the candidates inside them are kept, with their items",
)
register_filter(
    "focus-outline-zoom", lambda context: _focus_outline(context, zoom="model",
                                                         name="focus-outline-zoom"),
    needs_retriever=True, description="focus-outline with a second call that picks the "
    "lines inside the chosen sections",
)
