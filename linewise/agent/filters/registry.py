"""Observation filters by name: what ``--filter NAME`` (run, bench, filter-eval) selects.

A filter is registered under a name with a *factory*: a function that receives a
``FilterContext`` (the filter settings, the retriever model if one was opened, an
embedder provider and the retriever's token limits) and returns a fresh
``ObservationFilter``. A fresh one per episode, since filters keep episode state.

    from linewise.agent.filters.registry import FilterContext, register_filter

    @register_filter("headings")
    def make_headings(context: FilterContext) -> HeadingsFilter:
        return HeadingsFilter(context.settings.max_obs_tokens)

The built-in filters are registered the same way, in :mod:`.builtins`, which this
module imports (by name, as a plugin) the first time a name is looked up or registered:
this module is only the mechanism. A package can also offer
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
from importlib import import_module, metadata
from typing import TYPE_CHECKING, overload

from linewise.errors import ConfigError
from linewise.settings import DEFAULT_CONTEXT_TOKENS, ENDPOINT_VIEW_BUDGET_TOKENS, FilterSettings

if TYPE_CHECKING:
    from linewise.agent.filters.base import ObservationFilter
    from linewise.agent.models import ChatModel
    from linewise.agent.text.embedders import Embedder
    from linewise.agent.text.learned import TrainedReranker

ENTRY_POINT_GROUP = "linewise.filters"

BUILTINS = "linewise.agent.filters.builtins"
"""The module that registers the built-in filters, read on first use."""

EmbedderProvider = Callable[[], "Embedder"]
RerankerProvider = Callable[[], "TrainedReranker"]


@dataclass(frozen=True)
class FilterContext:
    """What a filter factory may build its filter from."""

    settings: FilterSettings = field(default_factory=FilterSettings)
    retriever: ChatModel | None = None
    """The retriever chat model; set when the filter's registration needs one."""
    embedder: EmbedderProvider | None = None
    """Gives the shared embedder (made on first use); None when none is configured."""
    reranker: RerankerProvider | None = None
    """Gives the shared reranker of the ``units`` stage; None unless the retriever
    weights are a reranker's."""
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
_builtins_read = False


def _read_builtins() -> None:
    """Register the built-in filters, once, before any other: they come first in every
    list. The module is named, not imported at the top: it registers itself through this
    one, and the filter lists must not wait for it until a name is needed."""
    global _builtins_read
    if not _builtins_read:
        _builtins_read = True
        import_module(BUILTINS)


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
    _read_builtins()
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
    _read_builtins()
    _registry.pop(name, None)


@cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def filter_names(*, include_hidden: bool = False, entry_points: bool = True) -> list[str]:
    """The names a newcomer is shown (``include_hidden``: every name ``--filter``
    accepts): registered ones in registration order, then entry points (shown unless
    their registration is hidden, which is known once they are loaded)."""
    _read_builtins()
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
    _read_builtins()
    if name not in _registry and name in _entry_points():
        _load_entry_point(_entry_points()[name])
    try:
        return _registry[name]
    except KeyError:
        raise unknown_filter(name) from None


def check_filter_name(name: str) -> str:
    """``name`` if some filter has it, else a ConfigError listing the available ones."""
    _read_builtins()
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
            if trained_embedder(settings):
                assert settings.retriever_weights is not None
                made.append(TrainedEmbedder(settings.retriever_weights))
            else:
                made.append(make_embedder(
                    settings.embedding_base_url, settings.embedding_model, api_key=api_key
                ))
        return made[0]

    return provide


def trained_embedder(settings: FilterSettings) -> bool:
    """Whether the retriever weights are an embedder's (they replace the embedder)."""
    from linewise.agent.text.learned import EMBEDDER_KIND, folder_kind

    weights = settings.retriever_weights
    return weights is not None and folder_kind(weights) == EMBEDDER_KIND


def shared_reranker(settings: FilterSettings) -> RerankerProvider | None:
    """A provider of the reranker the retriever weights hold (loaded on first use and
    shared), or None when they hold none: a reranker reorders the ``units`` stage's best
    units and leaves the embedder as it is configured."""
    from linewise.agent.text.learned import RERANKER_KIND, TrainedReranker, folder_kind

    weights = settings.retriever_weights
    if weights is None or folder_kind(weights) != RERANKER_KIND:
        return None
    made: list[TrainedReranker] = []

    def provide() -> TrainedReranker:
        if not made:
            made.append(TrainedReranker(weights))
        return made[0]

    return provide
