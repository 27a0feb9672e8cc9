"""Settings: environment variables, then CLI flags on top.

Every setting has an environment variable (``LINEWISE_…``; nested ones with ``__``,
e.g. ``LINEWISE_ACTION__MODEL``). The standard ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY`` work as they do for the openai client. The retriever endpoint
falls back to the action endpoint. With no base URL anywhere, the embedded local
model is started and serves both.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from linewise.errors import ConfigError


class EndpointSettings(BaseModel):
    """One OpenAI-compatible chat endpoint and how hard we may use it."""

    base_url: str | None = Field(default=None, description="e.g. http://localhost:8000/v1")
    api_key: str | None = None
    model: str | None = None
    temperature: float = 0.0
    max_tokens: int = Field(default=768, ge=1)
    timeout_s: float = Field(default=600.0, gt=0)
    max_in_flight: int = Field(default=4, ge=1, description="Concurrent requests.")
    requests_per_second: float | None = Field(default=None, gt=0)
    max_retries: int = Field(default=2, ge=0, description="Transport retries by the client.")

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

    gguf: Path | None = Field(default=None, description="A GGUF file instead of the embedded one.")
    ctx_size: int = Field(default=32768, ge=2048)
    threads: int | None = None
    parallel: int = Field(default=1, ge=1)
    startup_timeout_s: float = 300.0


FILTER_NAMES = ("none", "truncate", "embedding", "lines", "lines+structure")


class FilterSettings(BaseModel):
    """Which observation filter runs, and its knobs (see agent/filters/)."""

    name: str = Field(default="none", description="One of " + ", ".join(FILTER_NAMES))
    max_obs_tokens: int = Field(default=40_000, ge=1, description="truncate: token budget.")
    json_schema: str = Field(default="auto", pattern="^(auto|on|off)$")
    incremental: bool = True
    cost_gate: bool = True
    price_action_input: float = Field(default=2.0, ge=0, description="$ per 1M tokens.")
    price_retriever_input: float = Field(default=0.4, ge=0)
    price_retriever_output: float = Field(default=1.6, ge=0)
    retriever_context_tokens: int | None = Field(
        default=None, description="Default: the local model's context, else 32768."
    )
    retriever_window_tokens: int | None = Field(
        default=None,
        description="Observation tokens per retriever call. Default: 8192 for the local "
        "model (on a CPU prefill slows as the context grows, so several short windows "
        "cost less time than one long one; see benchmarks/NOTES.md), else as much as the "
        "context holds.",
    )
    embedding_base_url: str | None = None
    embedding_model: str | None = None
    embedding_top_k: int = Field(default=10, ge=1)

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in FILTER_NAMES:
            raise ValueError(f"unknown filter {value!r}; choose one of {', '.join(FILTER_NAMES)}")
        return value


class LinewiseSettings(BaseSettings):
    """Everything a run needs to know that is not in the task file."""

    model_config = SettingsConfigDict(
        env_prefix="LINEWISE_", env_nested_delimiter="__", extra="ignore"
    )

    action: EndpointSettings = Field(default_factory=EndpointSettings)
    retriever: EndpointSettings = Field(default_factory=EndpointSettings)
    local: LocalModelSettings = Field(default_factory=LocalModelSettings)
    filter: FilterSettings = Field(default_factory=FilterSettings)
    chromium: str | None = None
    headless: bool = True
    screenshots: bool = True
    parse_retries: int = Field(default=2, ge=0, description="Re-asks after a malformed answer.")
    repeat_escapes: int = Field(
        default=2,
        ge=0,
        description="Re-asks when the answer repeats an action that changed nothing (0: off).",
    )
    reask_temperature: float = Field(
        default=0.7, ge=0, description="Sampling of every re-ask (parse retries, repeats)."
    )
    episode_timeout_s: float | None = Field(default=None, gt=0)
    log_json: bool | None = None

    def resolved(self) -> LinewiseSettings:
        """Apply the fall-backs: OPENAI_* for the action endpoint, action for the retriever."""
        action = self.action.model_copy()
        action.base_url = action.base_url or _env_url("OPENAI_BASE_URL")
        action.api_key = action.api_key or os.environ.get("OPENAI_API_KEY")
        retriever = self.retriever.model_copy()
        if retriever.base_url is None:
            retriever.base_url = action.base_url
            retriever.api_key = retriever.api_key or action.api_key
            retriever.model = retriever.model or action.model
        if action.base_url and not action.model:
            raise ConfigError(
                f"An endpoint is configured ({action.base_url}) but no model: "
                "pass --model or set LINEWISE_ACTION__MODEL."
            )
        return self.model_copy(update={"action": action, "retriever": retriever})

    @property
    def uses_local_model(self) -> bool:
        return self.action.base_url is None or self.retriever.base_url is None


def _env_url(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value.rstrip("/") or None
