"""The filter a run was asked for, resolved once, at the edge of the run.

A run is given a filter as a registered name, a registration, a factory or one filter
object (``FilterChoice``). ``resolve_filter`` turns any of them into a
``ResolvedFilter`` (a name is looked up in the registry there, and only there); the run
then asks the resolved filter whether it needs a retriever and binds it to the run's
models once per run, for a maker that gives each episode its own filter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from linewise.agent.filters.base import ObservationFilter
from linewise.agent.filters.registry import (
    FilterContext,
    FilterFactory,
    FilterMaker,
    FilterRegistration,
    get_filter,
    shared_embedder,
    shared_reranker,
)
from linewise.agent.models import ChatModel
from linewise.agent.profile import DEFAULT_PROFILE, ModelProfile, profile_of
from linewise.settings import FilterSettings, LinewiseSettings

FilterChoice = str | FilterRegistration | FilterFactory | ObservationFilter
"""A registered filter's name; a registration; a factory (``FilterContext`` in, a fresh
filter out); or one filter object, then shared by every episode."""


@dataclass(frozen=True)
class ResolvedFilter:
    """A filter choice after its one registry look-up."""

    name: str
    """The name it was chosen by (a registration's, or the filter object's)."""
    registration: FilterRegistration | None
    """None for a factory or a filter object of the caller's: they need no retriever."""
    factory: FilterFactory

    def needs_retriever(
        self, settings: FilterSettings | None = None, *, endpoint_opened: bool = False
    ) -> bool:
        """Whether the run must open a retriever for it (for ``settings`` when given:
        ``focus``'s preset decides); ``endpoint_opened``: the run opens the action
        endpoint anyway, so a filter that only wants a retriever gets one (the same
        endpoint, by default)."""
        if self.registration is None:
            return False
        needs = (self.registration.needs_retriever_for(settings) if settings is not None
                 else self.registration.needs_retriever)
        return needs or (endpoint_opened and self.registration.wants_retriever)

    def bind(self, context: FilterContext) -> FilterMaker:
        """The per-episode maker on ``context`` (a registration checks it first)."""
        if self.registration is not None:
            return self.registration.bind(context)
        factory = self.factory
        return lambda: factory(context)


def resolve_filter(choice: FilterChoice) -> ResolvedFilter:
    """``choice`` resolved: a name is looked up in the registry (a ConfigError naming
    the available filters when there is none of that name)."""
    if isinstance(choice, str):
        registration = get_filter(choice)
        return ResolvedFilter(choice, registration, registration.factory)
    if isinstance(choice, FilterRegistration):
        return ResolvedFilter(choice.name, choice, choice.factory)
    if _is_filter_object(choice):
        shared = cast(ObservationFilter, choice)
        return ResolvedFilter(shared.name, None, lambda _context: shared)
    factory = cast(FilterFactory, choice)
    return ResolvedFilter(getattr(factory, "__name__", "custom"), None, factory)


def _is_filter_object(choice: object) -> bool:
    """A filter itself (``name`` and ``apply``), not a factory or a filter class."""
    return (not isinstance(choice, type) and isinstance(getattr(choice, "name", None), str)
            and callable(getattr(choice, "apply", None)))


def filter_needs_retriever(
    choice: FilterChoice, settings: FilterSettings | None = None, *, endpoint_opened: bool = False
) -> bool:
    """``ResolvedFilter.needs_retriever`` of ``choice``."""
    return resolve_filter(choice).needs_retriever(settings, endpoint_opened=endpoint_opened)


def filter_context(
    settings: LinewiseSettings, retriever: ChatModel | None, *,
    action_profile: ModelProfile | None = None, retriever_profile: ModelProfile | None = None,
) -> FilterContext:
    """What a filter factory gets for ``settings.filter``. The retriever's context and
    window are its profile's (``profile_of(retriever)``, or ``retriever_profile``)
    unless the filter settings set them; the comfortable view is the action model's
    (``action_profile``: the profile of the run's action model) unless the agent
    settings set it, and never more than half the action model's context."""
    chosen = settings.filter
    retrieving = retriever_profile or profile_of(retriever)
    acting = action_profile or DEFAULT_PROFILE
    view_budget = settings.agent.view_budget_tokens or acting.view_budget_tokens
    return FilterContext(
        settings=chosen,
        retriever=retriever,
        embedder=shared_embedder(chosen, api_key=settings.action.api_key),
        reranker=shared_reranker(chosen),
        retriever_context_tokens=(chosen.retriever_context_tokens
                                  if chosen.retriever_context_tokens is not None
                                  else retrieving.context_tokens),
        retriever_window_tokens=(chosen.retriever_window_tokens
                                 if chosen.retriever_window_tokens is not None
                                 else retrieving.window_tokens),
        view_budget_tokens=min(view_budget, acting.context_tokens // 2),
    )


def build_filter_maker(
    settings: LinewiseSettings,
    choice: FilterChoice | ResolvedFilter | None = None,
    *,
    retriever: ChatModel | None = None,
    action_profile: ModelProfile | None = None,
    retriever_profile: ModelProfile | None = None,
) -> FilterMaker:
    """The per-episode filter maker for ``choice`` (default: ``settings.filter.name``);
    the profiles as in ``filter_context``."""
    resolved = as_resolved(choice if choice is not None else settings.filter.name)
    return resolved.bind(filter_context(settings, retriever, action_profile=action_profile,
                                        retriever_profile=retriever_profile))


def as_resolved(choice: FilterChoice | ResolvedFilter) -> ResolvedFilter:
    """``choice`` as it is when already resolved, else resolved."""
    return choice if isinstance(choice, ResolvedFilter) else resolve_filter(choice)
