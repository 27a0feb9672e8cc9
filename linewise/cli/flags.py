"""Flag groups shared by the subcommands, and how flags become settings.

Every flag that sets a setting is one row of ``SETTINGS_FLAGS``: its argparse ``dest``
and the settings path(s) it overrides. ``settings_from_args`` reads the environment
(``LinewiseSettings()``), lays every given flag on top and applies the fall-backs. A
flag is "given" when its value is not None, so flags default to None (on/off flags
store a constant), and a flag a subcommand does not have counts as not given.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from linewise.agent.filters.registry import check_filter_name
from linewise.errors import ConfigError
from linewise.settings import LinewiseSettings

SettingsPath = tuple[str, ...]

SETTINGS_FLAGS: dict[str, tuple[SettingsPath, ...]] = {
    "base_url": (("action", "base_url"),),
    "model": (("action", "model"),),
    "api_key": (("action", "api_key"),),
    "retriever_base_url": (("retriever", "base_url"),),
    "retriever_model": (("retriever", "model"),),
    "max_in_flight": (("action", "max_in_flight"), ("retriever", "max_in_flight")),
    "rps": (("action", "requests_per_second"), ("retriever", "requests_per_second")),
    "gguf": (("local", "gguf"),),
    "ctx_size": (("local", "ctx_size"),),
    "filter": (("filter", "name"),),
    "max_obs_tokens": (("filter", "max_obs_tokens"),),
    "cost_gate": (("filter", "cost_gate"),),
    "parse_retries": (("agent", "parse_retries"),),
    "repeat_escapes": (("agent", "repeat_escapes"),),
    "headless": (("browser", "headless"),),
    "chromium": (("browser", "chromium"),),
    "slow_mo": (("browser", "slow_mo_ms"),),
    "action_timeout": (("browser", "action_timeout_ms"),),
    "playwright_trace": (("browser", "playwright_trace"),),
    "screenshots": (("screenshots",),),
    "episode_timeout": (("episode_timeout_s",),),
}
"""argparse dest -> the settings it overrides."""


def settings_from_args(args: argparse.Namespace, *, resolve: bool = True) -> LinewiseSettings:
    """Environment first, flags on top (``SETTINGS_FLAGS``), then (``resolve``) the
    documented fall-backs of the endpoints, which commands without a model skip."""
    overrides: dict[str, Any] = {}
    given: dict[SettingsPath, str] = {}
    for dest, paths in SETTINGS_FLAGS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        for path in paths:
            *groups, key = path
            target = overrides
            for group in groups:
                target = target.setdefault(group, {})
            target[key] = value
            given[path] = dest
    try:
        settings = LinewiseSettings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, given)) from exc
    if settings.local.gguf is not None and not settings.local.gguf.exists():
        raise ConfigError(f"--gguf: no such file: {settings.local.gguf}")
    return settings.resolved() if resolve else settings


def _describe(exc: ValidationError, given: dict[SettingsPath, str]) -> str:
    """Each invalid setting with the flag that set it, or else its environment variable."""
    problems = []
    for error in exc.errors():
        path = tuple(str(part) for part in error["loc"][:2])
        dest = given.get(path) or given.get(path[:1])
        source = (f"--{dest.replace('_', '-')}" if dest
                  else "LINEWISE_" + "__".join(path).upper())
        problems.append(f"{source}: {error['msg']}")
    return "invalid settings: " + "; ".join(problems)


def filter_name(text: str) -> str:
    """argparse ``type`` of ``--filter``: any registered filter (or entry point)."""
    try:
        return check_filter_name(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_browser_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--headed", dest="headless", action="store_const", const=False,
                        help="show the browser window")
    parser.add_argument("--chromium", help="Chromium binary (default: found automatically)")
    parser.add_argument("--slow-mo", type=int, metavar="MS",
                        help="delay every browser operation (debugging)")
    parser.add_argument("--action-timeout", type=int, metavar="MS",
                        help="how long an action waits for its element")


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint of the action model")
    parser.add_argument("--model", help="action model name")
    parser.add_argument("--api-key", help="API key (default: OPENAI_API_KEY)")
    parser.add_argument("--retriever-base-url", help="endpoint of the retriever model")
    parser.add_argument("--retriever-model", help="retriever model name")
    parser.add_argument("--gguf", type=Path, help="serve this GGUF instead of the embedded model")
    parser.add_argument("--ctx-size", type=int, help="context size of the local model server")


def add_request_limit_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-in-flight", type=int, metavar="N",
                        help="LLM requests in flight per endpoint (default 4)")
    parser.add_argument("--rps", type=float, metavar="R",
                        help="LLM requests per second per endpoint (default unlimited)")


def add_agent_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parse-retries", type=int, help="re-asks after a malformed answer")
    parser.add_argument("--repeat-escapes", type=int, metavar="N",
                        help="re-asks when the answer repeats an action that changed nothing "
                        "on the page (default 2; 0 turns off)")


def add_episode_flags(parser: argparse.ArgumentParser, *, timeout_default: str = "none") -> None:
    parser.add_argument("--max-obs-tokens", type=int, help="token budget of the truncate filter")
    parser.add_argument("--episode-timeout", type=float, metavar="S",
                        help="wall-clock limit per episode, in seconds "
                        f"(default {timeout_default})")
    parser.add_argument("--no-screenshots", dest="screenshots", action="store_const",
                        const=False, help="do not save screenshots")
    parser.add_argument("--playwright-trace", action="store_const", const=True,
                        help="record a Playwright trace of every step (open it with "
                        "playwright show-trace; costs time and disk)")


def add_log_flags(parser: argparse.ArgumentParser, *, level: str, json_help: str = "") -> None:
    parser.add_argument("--log-json", action="store_true",
                        help=json_help or "log JSON lines even on a terminal")
    parser.add_argument("--log-level", default=level)
