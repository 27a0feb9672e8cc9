"""The named model profiles, and the one place an endpoint's profile is resolved.

A profile (``agent.profile.ModelProfile``) is resolved once per endpoint, when its
client is built (``runtime.models.factory``), from three things in this order:

1. the endpoint's ``profile`` setting, when it names one of :data:`PROFILES`;
2. otherwise ``embedded`` when linewise serves the endpoint itself (no base URL: the
   embedded model, or ``--gguf``); the factory writes that name into the endpoint it
   hands on, so that a Ray worker resolves the same profile as the driver;
3. otherwise what the endpoint's model list says serves it (``owned_by``, read by the
   client's probe: :data:`SERVED_BY`), else ``openai-compatible``.

The named profile gives the request format and the capability flags; the sizes come
from the settings: the endpoint's context and answer length, the comfortable view
(never more than half the context), and for the embedded model the local server's
context and retriever window. What the user sets for a role (``agent.view_budget_tokens``,
``filter.retriever_context_tokens``…) is laid over the profile where the role's
numbers are used (``runtime.filter_choice.filter_context``).

A new OpenAI-compatible backend is one entry in :data:`PROFILES` (and in
:data:`SERVED_BY` if its model list names it), and one test.
"""

from __future__ import annotations

from linewise.agent.profile import DEFAULT_PROFILE, ModelProfile
from linewise.errors import ConfigError
from linewise.settings import (
    DEFAULT_CONTEXT_TOKENS,
    LOCAL_VIEW_BUDGET_TOKENS,
    EndpointSettings,
    LocalModelSettings,
)

EMBEDDED = "embedded"

PROFILES: dict[str, ModelProfile] = {
    # linewise's own llama.cpp server and its small CPU model: llama.cpp takes a GBNF
    # grammar in ``grammar``, and the small model needs the small-model defaults.
    EMBEDDED: DEFAULT_PROFILE.replace(
        name=EMBEDDED, view_budget_tokens=LOCAL_VIEW_BUDGET_TOKENS, grammar_by_default=True,
        answer_check=True, past_thoughts=False),
    # a llama.cpp server of someone else's, serving a model of unknown size
    "llama.cpp": DEFAULT_PROFILE.replace(name="llama.cpp"),
    # vLLM takes a GBNF grammar in ``guided_grammar`` (and a bare schema in
    # ``guided_json``; ``response_format`` too, kept here as for every other server)
    "vllm": DEFAULT_PROFILE.replace(name="vllm", grammar_field="guided_grammar"),
    # OpenAI's API takes JSON schemas and refuses every grammar field
    "openai": DEFAULT_PROFILE.replace(name="openai", grammar_field=None),
    # anything else: asked as llama.cpp would be, and told no more than the protocol
    # says; an endpoint that refuses a constraint is asked without it (agent.structured)
    "openai-compatible": DEFAULT_PROFILE,
}
"""Every named profile, its sizes still the defaults (see :func:`resolve_profile`)."""

SERVED_BY: dict[str, str] = {"llamacpp": "llama.cpp", "vllm": "vllm"}
"""A model list's ``owned_by`` to the profile of the server that wrote it."""


def profile_name(endpoint: EndpointSettings, served_by: str | None = None) -> str:
    """The named profile of ``endpoint`` (see the module); ``served_by``: the
    ``owned_by`` its model list gave, if it was probed."""
    if endpoint.profile != "auto":
        if endpoint.profile not in PROFILES:
            raise ConfigError(f"unknown model profile {endpoint.profile!r}: use auto or one of "
                              f"{', '.join(PROFILES)}")
        return endpoint.profile
    if endpoint.base_url is None:
        return EMBEDDED
    return SERVED_BY.get((served_by or "").lower(), "openai-compatible")


def resolve_profile(
    endpoint: EndpointSettings,
    *,
    local: LocalModelSettings | None = None,
    served_by: str | None = None,
) -> ModelProfile:
    """The profile of the model at ``endpoint``: the named profile (:func:`profile_name`)
    with the endpoint's sizes, and for the embedded model the local server's (``local``,
    default: its defaults)."""
    local = local or LocalModelSettings()
    named = PROFILES[profile_name(endpoint, served_by)]
    embedded = named.name == EMBEDDED
    context = endpoint.context_tokens or (local.ctx_size if embedded else DEFAULT_CONTEXT_TOKENS)
    return named.replace(
        context_tokens=context,
        answer_tokens=endpoint.max_tokens,
        view_budget_tokens=min(named.view_budget_tokens, context // 2),
        window_tokens=local.retriever_window_tokens if embedded else named.window_tokens,
    )
