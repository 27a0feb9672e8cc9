"""Settings: environment variables, then CLI flags on top, frozen once built.

Every setting has an environment variable (``LINEWISE_…``; nested ones with ``__``,
e.g. ``LINEWISE_ACTION__MODEL``). The standard ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY`` work as they do for the openai client. The retriever endpoint
falls back to the action endpoint. With no base URL anywhere, the embedded local
model is started and serves both.

The groups are handed down whole: ``agent`` to the policy, ``filter`` to the filter
registry, ``browser`` to the browser, ``action``/``retriever`` to the chat clients.
Every model is frozen; a changed copy is made with ``model_copy(update=...)``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from linewise.errors import ConfigError

DEFAULT_CONTEXT_TOKENS = 32768
"""The context window assumed for a model when nothing says otherwise (the embedded
model is served with this context by default too)."""

LOCAL_VIEW_BUDGET_TOKENS = 2000
"""The page tokens the embedded 1.5B model reads comfortably in one step: it reads its
prompt at about 50 tokens/s on two cores, and reads a small view better than a large one
(docs/design.md, "The view budget")."""

ENDPOINT_VIEW_BUDGET_TOKENS = 8000
"""The page tokens shown whole to a model behind an endpoint before ``auto`` filters: a
documentation page is 25k-80k tokens, which costs a cloud model dearly every step and
overflows many contexts."""

DEFAULT_EPISODE_TIMEOUT_S = 600.0
"""Every episode has a wall-clock limit unless one is set: a run must always end."""

LOCAL_TIMEOUT_S = 1800.0
"""The least request timeout of the locally served model: a CPU model may take many
minutes over one long prompt on a busy machine (runtime/run.py ``_local_slots``)."""

_FROZEN = ConfigDict(frozen=True)


class EndpointSettings(BaseModel):
    """One OpenAI-compatible chat endpoint and how hard we may use it."""

    model_config = _FROZEN

    base_url: str | None = Field(default=None, description="e.g. http://localhost:8000/v1")
    api_key: str | None = None
    model: str | None = None
    temperature: float = 0.0
    max_tokens: int = Field(default=768, ge=1)
    context_tokens: int | None = Field(
        default=None, ge=1024,
        description="The model's context window in tokens; the action prompt is fitted "
        "into it. Default: the embedded model's ctx_size, else "
        f"{DEFAULT_CONTEXT_TOKENS}.",
    )
    timeout_s: float = Field(
        default=120.0, gt=0,
        description="Deadline of each attempt of a call, from the request to the last byte "
        "of the answer: a remote endpoint that has not answered in two minutes is stalled "
        "(the embedded model gets a longer one, see runtime/run.py).",
    )
    max_in_flight: int = Field(default=4, ge=1, description="Concurrent requests.")
    requests_per_second: float | None = Field(default=None, gt=0)
    max_retries: int = Field(
        default=8, ge=0,
        description="Retries of one call after a 429, a 5xx, a timeout or a dropped "
        "connection, within retry_budget_s.",
    )
    retry_budget_s: float = Field(
        default=180.0, ge=0,
        description="Longest time one call may spend on retries (waits included); after "
        "it the call fails as an infrastructure fault.",
    )
    backoff_initial_s: float = Field(
        default=1.0, gt=0, description="First wait before a retry; doubled each time, "
        "with jitter, unless the endpoint sends Retry-After."
    )
    backoff_max_s: float = Field(default=30.0, gt=0, description="Longest wait between tries.")
    profile: str = Field(
        default="auto", min_length=1,
        description="What serves this endpoint: a name of runtime/models/profiles.py's "
        "PROFILES (--model-profile lists them). It decides the request fields of a grammar "
        "and a JSON schema, and the defaults of a small model. auto: embedded when there is "
        "no base URL, else what the endpoint's model list names, else openai-compatible. "
        "Checked when the endpoint is opened.",
    )

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base URL must start with http:// or https://, got {value!r}")
        return value.rstrip("/")


class LocalModelSettings(BaseModel):
    """The embedded llama.cpp server, used when no endpoint is configured."""

    model_config = _FROZEN

    gguf: Path | None = Field(default=None, description="A GGUF file instead of the embedded one.")
    ctx_size: int = Field(default=DEFAULT_CONTEXT_TOKENS, ge=2048)
    threads: int | None = None
    parallel: int = Field(default=1, ge=1)
    startup_timeout_s: float = 300.0
    retriever_window_tokens: int = Field(
        default=8192,
        ge=256,
        description="Observation tokens per call of the embedded retriever: on a CPU, "
        "prefill slows as the context grows, so several 8k windows cost less time than "
        "one long prompt (and a 1.5B model reads them better).",
    )


class FilterSettings(BaseModel):
    """Which observation filter runs, and its knobs (see agent/filters/).

    ``name`` is any filter in the registry (agent/filters/registry.py): the built-in
    ones, those registered in code and those of the ``linewise.filters`` entry points.
    It is checked when the filter is built, not here.
    """

    model_config = _FROZEN

    name: str = Field(default="auto", min_length=1, description="A registered filter name.")
    max_obs_tokens: int = Field(default=40_000, ge=1, description="truncate: token budget.")
    json_schema: Literal["auto", "on", "off"] = Field(
        default="auto", description="Retriever answers under a JSON schema (agent/structured.py"
        "): auto asks without it once the endpoint refuses it.")
    incremental: bool = True
    cost_gate: bool = True
    defend: bool = Field(
        default=False,
        description="lines, lines+structure, focus (a preset whose retriever chooses): the "
        "retriever also drops page text that addresses or instructs the agent "
        "(prompts/retriever_defend.md).",
    )
    price_action_input: float = Field(default=2.0, ge=0, description="$ per 1M tokens.")
    price_action_output: float = Field(
        default=8.0, ge=0, description="Not used by the cost gate; budgets and reports."
    )
    price_retriever_input: float = Field(default=0.4, ge=0)
    price_retriever_output: float = Field(default=1.6, ge=0)
    retriever_context_tokens: int | None = Field(
        default=None,
        description="Default: the local model's context (local.ctx_size), else "
        f"{DEFAULT_CONTEXT_TOKENS}.",
    )
    retriever_window_tokens: int | None = Field(
        default=None,
        description="Observation tokens per retriever call. Default: "
        "local.retriever_window_tokens for the local model (see its description), else as "
        "much as the context holds.",
    )
    embedding_base_url: str | None = None
    embedding_model: str | None = None
    retriever_weights: Path | None = Field(
        default=None,
        description="A trained retriever's weights folder (`linewise retriever train`): "
        "an embedder's embeds the page's units and the query in place of embedding_model; "
        "a reranker's reorders the units the embedder ranks best.",
    )
    embedding_top_k: int = Field(default=10, ge=1)
    focus_budget_tokens: int = Field(
        default=4000, ge=500, description="focus: the retriever's whole input per step, "
        "whatever the page's size.",
    )
    focus_preset: str = Field(
        default="expand-shared-units", min_length=1,
        description="focus: the named configuration it runs (agent/filters/stages/presets.py; "
        "`linewise filters` lists them). Checked when the filter is built.",
    )
    focus_stages: Annotated[tuple[str, ...] | None, NoDecode] = Field(
        default=None,
        description="focus: the candidate stages to run instead of the preset's (its "
        "chooser and items stay); comma-separated in the environment.",
    )

    @field_validator("focus_stages", mode="before")
    @classmethod
    def _split_stages(cls, value: Any) -> Any:
        """``"lexical,named"`` (an environment variable) as a tuple of names."""
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("retriever_weights")
    @classmethod
    def _weights_folder(cls, value: Path | None) -> Path | None:
        """A weights folder is checked when the run starts, not on its first page: a
        folder that is not one would otherwise leave every episode without the stage.
        (Its files' hashes are checked when it loads.)"""
        if value is not None and not (value / "manifest.json").is_file():
            raise ValueError(f"{value} is not a retriever weights folder (no manifest.json);"
                             " write one with `linewise retriever train`")
        return value


class AgentSettings(BaseModel):
    """The action policy's knobs (agent/policy.py ``ActionAgent``)."""

    model_config = _FROZEN

    parse_retries: int = Field(default=2, ge=0, description="Re-asks after a malformed answer.")
    repeat_escapes: int = Field(
        default=2,
        ge=0,
        description="Re-asks when the answer repeats an action that changed nothing (0: off).",
    )
    reask_temperature: float = Field(
        default=0.7, ge=0, description="Sampling of every re-ask (parse retries, repeats)."
    )
    action_grammar: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Decode the action answer under a GBNF grammar (agent/action_grammar.py): "
        "one call of the action space, with ids from the view. auto: as the model's profile "
        "says (on for the embedded model and --gguf, off for other endpoints); on: also for "
        "an endpoint, in the grammar field its profile names (one that refuses it is asked "
        "without; an openai profile takes none).",
    )
    answer_check: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="When the action neither answers nor gives up, ask the model whether "
        "its reasoning already states the answer, and send it if its words are on the page "
        "(agent/answer_check.py). For goals that ask a question, where the agent's answer "
        "ends the episode (not MiniWoB++); auto: as the model's profile says (the embedded "
        "model and --gguf); on: with any model.",
    )
    past_thoughts: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Show the model its own past thoughts in the history of its steps, "
        "beside their actions and results. off: actions and results only (a small model "
        "copies its last thought word for word and acts on it again); auto: as the model's "
        "profile says (off for the embedded model and --gguf, on for endpoints).",
    )
    memory: Path | None = Field(
        default=None,
        description="An experience memory (`linewise memory build`): each episode's "
        "prompts show the memory_k entries most like its goal and first page as worked "
        "examples, never one of the same task and seed.",
    )
    memory_k: int = Field(default=3, ge=1, description="Worked examples per episode, at most.")
    skills: Path | None = Field(
        default=None,
        description="A folder of skills (`linewise skills build`): the action model may "
        "call run_skill with those whose first elements are on the page; a skill's steps "
        "then replay with no model call until it ends or a step does not fit.",
    )
    skill_start: Literal["goal", "model"] = Field(
        default="goal",
        description="goal: at an episode's first step, a skill whose goal template the goal "
        "fits (and whose precondition holds) runs with the goal's values, no model asked; "
        "model: a skill runs only when the action model calls run_skill.",
    )
    replay_cache: Path | None = Field(
        default=None,
        description="A folder of programs of solved tasks (`--replay-cache`): a task solved "
        "before (the same definition: id, start page, goal) is replayed first, healed by "
        "the model where the page changed, and solved by the model only when healing "
        "fails; each solved task's program is kept there. Such episodes are 'replayed' or "
        "'healed', never counted as the agent's own success.",
    )
    memory_budget_tokens: int = Field(
        default=1500, ge=100, description="The examples block never takes more tokens."
    )
    view_budget_tokens: int | None = Field(
        default=None, ge=200,
        description="The page tokens the action model is shown comfortably: ``auto`` shows "
        "a smaller tree whole and filters a larger one down to it. Default: "
        f"{LOCAL_VIEW_BUDGET_TOKENS} for the embedded model, {ENDPOINT_VIEW_BUDGET_TOKENS} "
        "for an endpoint.",
    )


class NavigationSettings(BaseModel):
    """Where an episode's pages may go and what they may download (the navigation policy,
    runtime/browser/navigation.py). On by default; the task's own lists are added."""

    model_config = _FROZEN

    enforce: bool = Field(default=True, description="False turns the whole policy off.")
    allow_domains: tuple[str, ...] = Field(
        default=(), description="When set, pages and frames outside these are blocked."
    )
    block_domains: tuple[str, ...] = ()
    allow_private: bool = Field(
        default=False,
        description="Allow every loopback and private address and port (a loopback start "
        "URL alone opens only its own host and port).",
    )
    downloads: bool = Field(
        default=False, description="Save downloads into the episode's downloads/ folder."
    )
    # The policy proxy (runtime/browser/proxy.py) listens on loopback, where any local
    # client may connect; these keep one from holding it with idle connections.
    proxy_head_timeout_s: float = Field(
        default=5.0, gt=0,
        description="How long the policy proxy waits for a connection's request head "
        "before it closes the connection (Chromium sends it at once).",
    )
    proxy_max_connections: int = Field(
        default=256, ge=1,
        description="Connections one episode's policy proxy holds at once; more are "
        "answered 503 (Chromium opens at most 32 per proxy, plus WebSockets).",
    )


class BrowserSettings(BaseModel):
    """How Chromium is launched (runtime/browser/chromium.py ``BrowserConfig`` adds the rest)."""

    model_config = _FROZEN

    headless: bool = True
    chromium: str | None = Field(
        default=None, description="Chromium binary; found automatically when unset."
    )
    slow_mo_ms: int = Field(default=0, ge=0, description="Delay of every browser operation.")
    action_timeout_ms: int = Field(
        default=5000, ge=1, description="How long an action waits for its element."
    )
    # Deadlines: every browser operation of a step has one, so a page that stops
    # answering ends the step (written, with its failure) instead of hanging the run.
    navigation_timeout_ms: int = Field(
        default=30000, ge=1, description="How long a navigation (goto, task start) may take."
    )
    observe_timeout_ms: int = Field(
        default=20000, ge=1, description="How long reading the page into an observation may take."
    )
    frame_timeout_ms: int = Field(
        default=2000,
        ge=1,
        description="How long one frame may take to run a marking script; a frame that "
        "does not answer in time is skipped and recorded (StepRecord.skipped_frames).",
    )
    settle_timeout_ms: int = Field(
        default=5000, ge=1, description="How long waiting for the page to settle may take."
    )
    close_timeout_ms: int = Field(
        default=10000, ge=1, description="How long closing an episode's context may take."
    )

    navigation: NavigationSettings = Field(default_factory=NavigationSettings)
    playwright_trace: bool = Field(
        default=False,
        description="Record a Playwright trace per episode, one chunk per step "
        "(playwright-trace/step-NNN.zip in the episode folder).",
    )
    highlight_ms: int = Field(
        default=0,
        ge=0,
        description="In headed runs, box each action's target in the browser for this "
        "long before the action runs (0: off).",
    )
    # Dropped by default: text no person can see is never what a user's task is about
    # and is how injected instructions hide; a visible control keeps its own line (and
    # its accessible name), so only the hidden text runs and hidden elements go.
    invisible_text: Literal["drop", "mark", "keep"] = Field(
        default="drop",
        description="Text a person cannot see (off-screen, zero size, opacity 0, "
        "visibility hidden, font-size 0, the background's colour): drop its lines, mark "
        "them invisible='<reason>', or keep them as they are.",
    )


class SecretSpec(BaseModel):
    """Where a secret's value comes from and where it may be typed.

    The value is read from the environment variable ``env`` when the run starts and is
    never stored in settings; the model only sees ``<secret:NAME>``. ``domains``: hosts
    the secret may be typed on (``example.com`` also covers its subdomains, on any port;
    ``example.com:8443`` only that port); empty means the origin of the task's start URL
    (scheme, host and port).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    env: str = Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    domains: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        """``NAME: ENV_VAR`` is short for ``NAME: {env: ENV_VAR}``."""
        return {"env": data} if isinstance(data, str) else data


SECRET_NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
"""What ``NAME`` in ``<secret:NAME>`` may be."""


class BudgetSettings(BaseModel):
    """Spending limits; None: no limit. Costs use the filter settings' prices (the same
    numbers as the bench report), tokens count prompt and completion of every call.

    ``max_cost_usd``/``max_tokens`` bound one episode, ``max_run_cost_usd``/
    ``max_run_tokens`` all episodes of a run or bench together.
    """

    model_config = _FROZEN

    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_run_cost_usd: float | None = Field(default=None, gt=0)
    max_run_tokens: int | None = Field(default=None, ge=1)


class OutageSettings(BaseModel):
    """How a bench rides out a model endpoint that stops answering (apps/bench/outage.py).

    After ``failures_to_pause`` episodes in a row end on an endpoint fault, the bench
    starts no new episode and probes the endpoint, waiting ``probe_initial_s`` doubled
    each time (with jitter) up to ``probe_max_s``; it carries on when the endpoint
    answers, and stops cleanly (resumable) once it has been down for ``max_outage_s``.
    """

    model_config = _FROZEN

    failures_to_pause: int = Field(default=2, ge=1)
    probe_initial_s: float = Field(default=2.0, gt=0)
    probe_max_s: float = Field(default=60.0, gt=0)
    max_outage_s: float = Field(default=1800.0, gt=0)
    infra_retries: int = Field(
        default=1, ge=0,
        description="Times an episode that ended on a passing infrastructure fault "
        "(model endpoint, browser, local server) runs again within the same bench (its "
        "partial trace is set aside); --resume reruns every infrastructure ending.",
    )


FLAT_ENV_NAMES: dict[str, tuple[str, str]] = {
    "LINEWISE_PARSE_RETRIES": ("agent", "parse_retries"),
    "LINEWISE_REPEAT_ESCAPES": ("agent", "repeat_escapes"),
    "LINEWISE_REASK_TEMPERATURE": ("agent", "reask_temperature"),
    "LINEWISE_HEADLESS": ("browser", "headless"),
    "LINEWISE_CHROMIUM": ("browser", "chromium"),
}
"""Short variable names for settings that live in a group; the nested name
(``LINEWISE_AGENT__PARSE_RETRIES``) wins when both are set."""


class _FlatEnvSource(PydanticBaseSettingsSource):
    """Reads ``FLAT_ENV_NAMES``; pydantic's own parsing turns the strings into values."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the variables directly

    def __call__(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        environ = {key.upper(): value for key, value in os.environ.items()}
        for variable, (group, key) in FLAT_ENV_NAMES.items():
            if variable in environ:
                found.setdefault(group, {})[key] = environ[variable]
        return found


class LinewiseSettings(BaseSettings):
    """Everything a run needs to know that is not in the task file."""

    model_config = SettingsConfigDict(
        env_prefix="LINEWISE_", env_nested_delimiter="__", extra="ignore", frozen=True
    )

    action: EndpointSettings = Field(default_factory=EndpointSettings)
    retriever: EndpointSettings = Field(default_factory=EndpointSettings)
    local: LocalModelSettings = Field(default_factory=LocalModelSettings)
    filter: FilterSettings = Field(default_factory=FilterSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    browser: BrowserSettings = Field(default_factory=BrowserSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    secrets: dict[str, SecretSpec] = Field(
        default_factory=dict, description="<secret:NAME> placeholders: NAME -> where from."
    )
    outage: OutageSettings = Field(default_factory=OutageSettings)
    screenshots: bool = True
    episode_timeout_s: float | None = Field(
        default=DEFAULT_EPISODE_TIMEOUT_S, gt=0, description="Wall-clock limit per episode."
    )
    log_json: bool | None = None

    @field_validator("secrets")
    @classmethod
    def _check_secret_names(cls, value: dict[str, SecretSpec]) -> dict[str, SecretSpec]:
        for name in value:
            if not re.fullmatch(SECRET_NAME_PATTERN, name):
                raise ValueError(f"secret name {name!r}: use letters, digits, '.', '_', '-'")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _FlatEnvSource(settings_cls), dotenv_settings,
                file_secret_settings)

    def resolved(self) -> LinewiseSettings:
        """Apply the fall-backs: OPENAI_* for the action endpoint, action for the retriever."""
        action = self.action.model_copy(update={
            "base_url": self.action.base_url or _env_url("OPENAI_BASE_URL"),
            "api_key": self.action.api_key or os.environ.get("OPENAI_API_KEY"),
        })
        retriever = self.retriever
        if retriever.base_url is None:
            retriever = retriever.model_copy(update={
                "base_url": action.base_url,
                "api_key": retriever.api_key or action.api_key,
                "model": retriever.model or action.model,
                "profile": action.profile if retriever.profile == "auto" else retriever.profile,
            })
        if action.base_url and not action.model:
            raise ConfigError(
                f"An endpoint is configured ({action.base_url}) but no model: "
                "pass --model or set LINEWISE_ACTION__MODEL."
            )
        return self.model_copy(update={"action": action, "retriever": retriever})

    def with_filter(self, name: str, **knobs: Any) -> LinewiseSettings:
        """A copy whose filter is ``name`` (and ``knobs`` changed)."""
        return self.model_copy(
            update={"filter": self.filter.model_copy(update={"name": name, **knobs})}
        )

    # Deprecated: the four ``local=`` helpers below are kept for callers of earlier
    # versions. The runtime reads each model's profile instead (agent/profile.py,
    # resolved in runtime/models/profiles.py); runtime.filter_choice.filter_context lays
    # the filter and agent settings over it, with the same arithmetic.

    def action_context_tokens(self, *, local: bool) -> int:
        """Deprecated (see above). The action model's context: set for the endpoint,
        else the local server's (when the action model is the embedded one), else the
        default."""
        if self.action.context_tokens is not None:
            return self.action.context_tokens
        return self.local.ctx_size if local else DEFAULT_CONTEXT_TOKENS

    def view_budget_tokens(self, *, local: bool) -> int:
        """Deprecated (see above). The page tokens the action model is shown comfortably
        (``AgentSettings``), at most half its context."""
        budget = self.agent.view_budget_tokens or (
            LOCAL_VIEW_BUDGET_TOKENS if local else ENDPOINT_VIEW_BUDGET_TOKENS)
        return min(budget, self.action_context_tokens(local=local) // 2)

    def retriever_context_tokens(self, *, local: bool) -> int:
        """Deprecated (see above). The retriever's context: set explicitly, else the
        local server's (when the retriever is the embedded model), else the default."""
        if self.filter.retriever_context_tokens is not None:
            return self.filter.retriever_context_tokens
        return self.local.ctx_size if local else DEFAULT_CONTEXT_TOKENS

    def retriever_window_tokens(self, *, local: bool) -> int | None:
        """Deprecated (see above). Observation tokens per retriever call (None: as much
        as the context holds)."""
        if self.filter.retriever_window_tokens is not None:
            return self.filter.retriever_window_tokens
        return self.local.retriever_window_tokens if local else None


def _env_url(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value.rstrip("/") or None
