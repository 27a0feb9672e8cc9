"""Flag groups shared by the subcommands, and how flags become settings.

Every flag that sets a setting is one row of ``SETTINGS_FLAGS``: its argparse ``dest``
and the settings path(s) it overrides. ``settings_from_args`` reads the environment
(``LinewiseSettings()``), lays every given flag on top and applies the fall-backs. A
flag is "given" when its value is not None, so flags default to None (on/off flags
store a constant), and a flag a subcommand does not have counts as not given.

Every command's parser is built from here before its ``--help`` is printed, so this
module imports only the settings and the names of things (filters, presets, domain
patterns), never what a run needs (Playwright, BrowserGym, the model clients): see
tests/cli/test_help.py.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from linewise.agent.filters.registry import check_filter_name, filter_names
from linewise.agent.filters.stages.presets import (
    DEFAULT_PRESET,
    PRESETS,
    STAGES,
    get_preset,
    parse_stages,
)
from linewise.errors import ConfigError
from linewise.runtime.browser.navigation import DomainPattern, PatternError
from linewise.runtime.models.profiles import PROFILES
from linewise.settings import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_EPISODE_TIMEOUT_S,
    LOCAL_TIMEOUT_S,
    SECRET_NAME_PATTERN,
    FilterSettings,
    LinewiseSettings,
    SecretSpec,
)

SettingsPath = tuple[str, ...]

SETTINGS_FLAGS: dict[str, tuple[SettingsPath, ...]] = {
    "base_url": (("action", "base_url"),),
    "model": (("action", "model"),),
    "api_key": (("action", "api_key"),),
    "model_profile": (("action", "profile"),),
    "retriever_base_url": (("retriever", "base_url"),),
    "retriever_model": (("retriever", "model"),),
    "max_in_flight": (("action", "max_in_flight"), ("retriever", "max_in_flight")),
    "rps": (("action", "requests_per_second"), ("retriever", "requests_per_second")),
    "request_timeout": (("action", "timeout_s"), ("retriever", "timeout_s")),
    "retry_budget": (("action", "retry_budget_s"), ("retriever", "retry_budget_s")),
    "max_outage": (("outage", "max_outage_s"),),
    "gguf": (("local", "gguf"),),
    "ctx_size": (("local", "ctx_size"),),
    "context_tokens": (("action", "context_tokens"),),
    "view_budget": (("agent", "view_budget_tokens"),),
    "filter": (("filter", "name"),),
    "focus_preset": (("filter", "focus_preset"),),
    "focus_stages": (("filter", "focus_stages"),),
    "retriever_weights": (("filter", "retriever_weights"),),
    "max_obs_tokens": (("filter", "max_obs_tokens"),),
    "cost_gate": (("filter", "cost_gate"),),
    "parse_retries": (("agent", "parse_retries"),),
    "repeat_escapes": (("agent", "repeat_escapes"),),
    "action_grammar": (("agent", "action_grammar"),),
    "answer_check": (("agent", "answer_check"),),
    "memory": (("agent", "memory"),),
    "memory_k": (("agent", "memory_k"),),
    "replay_cache": (("agent", "replay_cache"),),
    "skills": (("agent", "skills"),),
    "skill_start": (("agent", "skill_start"),),
    "memory_budget": (("agent", "memory_budget_tokens"),),
    "headless": (("browser", "headless"),),
    "chromium": (("browser", "chromium"),),
    "slow_mo": (("browser", "slow_mo_ms"),),
    "action_timeout": (("browser", "action_timeout_ms"),),
    "navigation_timeout": (("browser", "navigation_timeout_ms"),),
    "observe_timeout": (("browser", "observe_timeout_ms"),),
    "frame_timeout": (("browser", "frame_timeout_ms"),),
    "allow_domain": (("browser", "navigation", "allow_domains"),),
    "block_domain": (("browser", "navigation", "block_domains"),),
    "allow_private": (("browser", "navigation", "allow_private"),),
    "downloads": (("browser", "navigation", "downloads"),),
    "navigation_policy": (("browser", "navigation", "enforce"),),
    "playwright_trace": (("browser", "playwright_trace"),),
    "highlight": (("browser", "highlight_ms"),),
    "invisible_text": (("browser", "invisible_text"),),
    "defend": (("filter", "defend"),),
    "screenshots": (("screenshots",),),
    "episode_timeout": (("episode_timeout_s",),),
    "max_cost": (("budget", "max_cost_usd"),),
    "max_tokens": (("budget", "max_tokens"),),
    "max_run_cost": (("budget", "max_run_cost_usd"),),
    "max_run_tokens": (("budget", "max_run_tokens"),),
    "price_action_input": (("filter", "price_action_input"),),
    "price_action_output": (("filter", "price_action_output"),),
    "price_retriever_input": (("filter", "price_retriever_input"),),
    "price_retriever_output": (("filter", "price_retriever_output"),),
    "secrets": (("secrets",),),
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
        if dest == "secrets":  # (name, spec) pairs from the repeatable --secret
            value = dict(value)
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


def setting_default(dest: str) -> Any:
    """The default of the setting flag ``dest`` sets (``SETTINGS_FLAGS``)."""
    model: Any = LinewiseSettings
    *groups, key = SETTINGS_FLAGS[dest][0]
    for group in groups:
        model = model.model_fields[group].annotation
    return model.model_fields[key].default


def default_of(dest: str) -> str:
    """``default N`` for a flag's help, N read from the settings, so that the help
    cannot drift from what a run uses."""
    value = setting_default(dest)
    return f"default {value:g}" if isinstance(value, float) else f"default {value}"


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
AUTO_LEVEL_HELP = "auto: WARNING under the progress bar, else INFO"
"""What ``--log-level auto`` means, for the commands with a progress bar (bench, prune,
improve; apps/progress.py ``ProgressDisplay.for_terminal``)."""


def log_level(text: str) -> str:
    """argparse ``type`` of ``--log-level``: a level, or bench's ``auto``, in any case."""
    return text.upper() if text.upper() in LOG_LEVELS else text.lower()


def filter_name(text: str) -> str:
    """argparse ``type`` of ``--filter``: any registered filter (or entry point)."""
    try:
        return check_filter_name(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


DEFAULT_FILTER: str = FilterSettings.model_fields["name"].default


def filter_choices() -> str:
    """The public filter names for a ``--filter`` help, from the registry."""
    return (f"{', '.join(filter_names())}; research variants: linewise filters --all")


def focus_preset_name(text: str) -> str:
    """argparse ``type`` of ``--focus-preset``."""
    try:
        return get_preset(text).name
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def focus_stage_list(text: str) -> tuple[str, ...]:
    """argparse ``type`` of ``--focus-stages a,b,c``."""
    try:
        return parse_stages(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_focus_flags(parser: argparse.ArgumentParser) -> None:
    """How the ``focus`` filter is configured (agent/filters/stages/presets.py)."""
    group = parser.add_argument_group("the focus filter (linewise filters describes it)")
    group.add_argument("--focus-preset", type=focus_preset_name, metavar="NAME",
                       help=f"one of {', '.join(PRESETS)} (default {DEFAULT_PRESET})")
    group.add_argument("--focus-stages", type=focus_stage_list, metavar="A,B,…",
                       help="the candidate stages to run instead of the preset's, from "
                       f"{', '.join(STAGES)} (guard always runs)")
    group.add_argument("--retriever-weights", type=Path, metavar="DIR",
                       help="a trained retriever (linewise retriever train): an embedder "
                       "embeds the page's units in place of the offline MiniLM, a "
                       "reranker reorders the units it ranks best")


def domain_pattern(text: str) -> str:
    """argparse ``type`` of ``--allow-domain``/``--block-domain``."""
    try:
        DomainPattern.parse(text)
    except PatternError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_browser_flags(parser: argparse.ArgumentParser, *, acting: bool = True) -> None:
    """How Chromium runs; ``acting=False`` (a command that only reads a page) leaves out
    what only matters when actions run: --slow-mo, --highlight, --action-timeout and
    --downloads."""
    parser.add_argument("--headed", dest="headless", action="store_const", const=False,
                        help="show the browser window")
    parser.add_argument("--chromium", help="Chromium binary (default: found automatically)")
    if acting:
        parser.add_argument("--slow-mo", type=int, metavar="MS",
                            help="delay every browser operation, for watching "
                            f"({default_of('slow_mo')}: none)")
        parser.add_argument("--highlight", type=int, metavar="MS",
                            help="in a headed run, box each action's target for MS before "
                            f"it runs ({default_of('highlight')}: off; a headless run "
                            "ignores it, and says so)")
        parser.add_argument("--action-timeout", type=int, metavar="MS",
                            help="how long an action waits for its element "
                            f"({default_of('action_timeout')})")
    parser.add_argument("--navigation-timeout", type=int, metavar="MS",
                        help=f"deadline of a navigation ({default_of('navigation_timeout')})")
    parser.add_argument("--observe-timeout", type=int, metavar="MS",
                        help="deadline of reading the page each step "
                        f"({default_of('observe_timeout')})")
    parser.add_argument("--frame-timeout", type=int, metavar="MS",
                        help="deadline of one frame's marking; a frame that misses it is "
                        f"skipped and recorded ({default_of('frame_timeout')})")
    parser.add_argument("--invisible-text", choices=("drop", "mark", "keep"),
                        help="text a person cannot see: drop it from the observation, mark "
                        "it invisible='<reason>', or keep it "
                        f"({default_of('invisible_text')})")
    add_navigation_flags(parser, acting=acting)


def add_navigation_flags(parser: argparse.ArgumentParser, *, acting: bool = True) -> None:
    """The navigation policy (docs/security.md, "Navigation")."""
    group = parser.add_argument_group("navigation policy (on by default)")
    group.add_argument("--allow-domain", action="append", type=domain_pattern,
                       metavar="PATTERN", help="only pages on these domains (repeatable; "
                       "example.org includes its subdomains, *.example.org only them)")
    group.add_argument("--block-domain", action="append", type=domain_pattern,
                       metavar="PATTERN", help="never pages on these domains (repeatable)")
    group.add_argument("--allow-private", action="store_const", const=True,
                       help="allow every loopback and private address and port (a loopback "
                       "start URL alone opens only its own host and port)")
    if acting:
        group.add_argument("--downloads", action="store_const", const=True,
                           help="save downloads into the episode folder's downloads/ "
                           "(default: refused)")
    group.add_argument("--no-navigation-policy", dest="navigation_policy",
                       action="store_const", const=False,
                       help="turn the navigation policy off (experiments only)")


def add_model_flags(parser: argparse.ArgumentParser, *, model: str = "action",
                    role: str = "", agent: bool = True) -> None:
    """The endpoint flags. They set the action endpoint (``SETTINGS_FLAGS``); a command
    that uses it for another ``model`` (prune's base model) names it so, and says what
    it does (``role``). ``agent=False`` (no agent runs) leaves out the retriever, which
    only filters use, and --context-tokens, which only the agent's prompts are fitted
    to."""
    parser.add_argument("--base-url", metavar="URL",
                        help=f"OpenAI-compatible endpoint of the {model} model"
                        + (f": {role}" if role else "")
                        + " (default: OPENAI_BASE_URL, else the embedded model)")
    parser.add_argument("--model", help=f"{model} model name")
    parser.add_argument("--api-key", help="API key (default: OPENAI_API_KEY)")
    parser.add_argument("--model-profile", choices=["auto", *PROFILES],
                        help=f"what serves the {model} model: its request fields and "
                        f"small-model defaults ({default_of('model_profile')}: embedded "
                        "without a base URL, else what the endpoint's model list names)")
    if agent:
        parser.add_argument("--retriever-base-url", metavar="URL",
                            help="endpoint of the retriever model")
        parser.add_argument("--retriever-model", help="retriever model name")
    parser.add_argument("--gguf", type=Path, help="serve this GGUF instead of the embedded model")
    parser.add_argument("--ctx-size", type=int, metavar="N",
                        help=f"context size of the local model server ({default_of('ctx_size')})")
    if agent:
        parser.add_argument("--context-tokens", type=int, metavar="N",
                            help="the action endpoint's context window: every prompt is "
                            "fitted into it (default: --ctx-size for the embedded model, "
                            f"else {DEFAULT_CONTEXT_TOKENS})")
    parser.add_argument("--request-timeout", type=float, metavar="S",
                        help="deadline of each try of an LLM call, request to last byte, "
                        "in seconds "
                        f"({default_of('request_timeout')}; the embedded model gets at least "
                        f"{LOCAL_TIMEOUT_S:g})")
    parser.add_argument("--retry-budget", type=float, metavar="S",
                        help="longest time one LLM call may spend retrying 429s, 5xx, "
                        f"timeouts and dropped connections ({default_of('retry_budget')})")


def add_request_limit_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-in-flight", type=int, metavar="N",
                        help=f"LLM requests in flight per endpoint ({default_of('max_in_flight')})")
    parser.add_argument("--rps", type=float, metavar="R",
                        help="LLM requests per second per endpoint (default unlimited)")


def add_outage_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-outage", type=float, metavar="S",
                        help="stop the bench (resumable) once the model endpoint has been "
                        f"down this long, in seconds ({default_of('max_outage')})")


def add_view_budget_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--view-budget", type=int, metavar="N",
                        help="page tokens the action model is shown comfortably: the auto "
                        "filter shows a smaller tree whole and filters a larger one down to "
                        "it (default 2000 for the embedded model, 8000 for an endpoint)")


class _Refused(argparse.Action):
    """A flag the command refuses: left out of its help, and refused with ``reason`` when
    given. Without it argparse would take ``--memory`` for the start of ``--memory-k``
    and ``--skills DIR`` for ``--skills-arm`` followed by a stray DIR."""

    def __init__(self, option_strings: list[str], dest: str, reason: str = "") -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs="?", help=argparse.SUPPRESS)
        self.reason = reason

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        parser.error(f"{option_string}: {self.reason}")


def refuse_flag(parser: argparse.ArgumentParser, flag: str, reason: str) -> None:
    parser.add_argument(flag, action=_Refused, reason=reason)


def add_agent_flags(parser: argparse.ArgumentParser, *,
                    set_by_command: Mapping[str, str] | None = None) -> None:
    """The agent's flags, except those whose setting (an ``agent`` field, also the flag's
    dest) the command sets itself: ``set_by_command`` maps each to what the command makes
    (``"memory"``). A flag offered and then refused, or silently overridden, misleads;
    these are refused by name instead."""
    set_by_command = set_by_command or {}
    for name, what in set_by_command.items():
        refuse_flag(parser, f"--{name.replace('_', '-')}",
                    f"not taken here: {parser.prog} makes its own {what}")
    add_view_budget_flag(parser)
    parser.add_argument("--parse-retries", type=int, metavar="N",
                        help=f"re-asks after a malformed answer ({default_of('parse_retries')})")
    parser.add_argument("--repeat-escapes", type=int, metavar="N",
                        help="re-asks when the answer repeats an action that changed nothing "
                        f"on the page ({default_of('repeat_escapes')}; 0 turns off)")
    parser.add_argument("--action-grammar", choices=["auto", "on", "off"],
                        help="decode the action answer under a grammar: one call of the "
                        "action space, naming only ids in the view; auto: for the embedded "
                        "model and --gguf, on: also for an endpoint that takes llama.cpp's "
                        f"`grammar` field ({default_of('action_grammar')})")
    parser.add_argument("--answer-check", choices=["auto", "on", "off"],
                        help="when the action neither answers nor gives up, ask the model "
                        "whether its reasoning already states the answer, and send it if "
                        "its words are on the page, for goals that ask a question; auto: "
                        f"with the embedded model and --gguf ({default_of('answer_check')})")
    add_memory_flags(parser, path="memory" not in set_by_command)
    if "skills" not in set_by_command:
        parser.add_argument("--skills", type=Path, metavar="DIR",
                            help="offer the action model run_skill with the skills of DIR "
                            "(linewise skills build) whose first elements are on the page")
    parser.add_argument("--skill-start", choices=["goal", "model"],
                        help="goal: a skill whose goal template the goal fits starts at the "
                        "first step, no model asked; model: only when the model calls "
                        f"run_skill ({default_of('skill_start')})")
    if "replay_cache" not in set_by_command:
        parser.add_argument("--replay-cache", type=Path, metavar="DIR",
                            help="replay a task solved before from its program in DIR "
                            "(healed by the model where the page changed) and keep each "
                            "solved task's program there; such episodes count apart from "
                            "the agent's")


def add_memory_flags(parser: argparse.ArgumentParser, *, path: bool = True) -> None:
    """``--memory PATH`` (unless ``path`` is False: the command makes its own memory) and
    how many of its entries an episode is shown."""
    group = parser.add_argument_group("experience memory (linewise memory build)")
    if path:
        group.add_argument("--memory", type=Path, metavar="PATH",
                           help="show each episode the memory's entries most like its goal "
                           "and first page as worked examples (never its own task and seed)")
    group.add_argument("--memory-k", type=int, metavar="K",
                       help=f"worked examples per episode, at most ({default_of('memory_k')})")
    group.add_argument("--memory-budget", type=int, metavar="N",
                       help="tokens the examples may take in the prompt "
                       f"({default_of('memory_budget')})")


def add_max_obs_tokens_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-obs-tokens", type=int, metavar="N",
                        help="token budget of the truncate filter "
                        f"({default_of('max_obs_tokens')})")


def add_episode_flags(
    parser: argparse.ArgumentParser, *, timeout_default: str = f"{DEFAULT_EPISODE_TIMEOUT_S:g}"
) -> None:
    add_max_obs_tokens_flag(parser)
    parser.add_argument("--defend", action="store_const", const=True,
                        help="lines, lines+structure, focus (presets choose, items): the "
                        "retriever also drops page text that addresses or instructs the "
                        "agent (prompt injection)")
    parser.add_argument("--episode-timeout", type=float, metavar="S",
                        help="wall-clock limit per episode, in seconds "
                        f"(default {timeout_default})")
    parser.add_argument("--no-screenshots", dest="screenshots", action="store_const",
                        const=False, help="do not save screenshots")
    parser.add_argument("--playwright-trace", action="store_const", const=True,
                        help="record a Playwright trace of every step (open it with "
                        "linewise show-trace; costs time and disk)")


def secret_flag(text: str) -> tuple[str, SecretSpec]:
    """argparse ``type`` of ``--secret NAME=ENV_VAR[@DOMAIN,...]``."""
    name, eq, rest = text.partition("=")
    env, _, domains = rest.partition("@")
    if not eq or not re.fullmatch(SECRET_NAME_PATTERN, name) or not env:
        raise argparse.ArgumentTypeError(
            f"expected NAME=ENV_VAR or NAME=ENV_VAR@example.com,… got {text!r}"
        )
    try:
        spec = SecretSpec(env=env, domains=tuple(d for d in domains.split(",") if d))
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc.errors()[0]['msg']}") from None
    return name, spec


def add_safety_flags(parser: argparse.ArgumentParser) -> None:
    """Secrets and spending limits (runtime/secrets.py, runtime/budget.py)."""
    parser.add_argument(
        "--secret", dest="secrets", action="append", type=secret_flag,
        metavar="NAME=ENV_VAR[@DOMAIN,…]",
        help="a secret the model writes as <secret:NAME> and fill() types, read from "
        "ENV_VAR, typed only on DOMAINs (default: the start URL's host); repeatable")
    parser.add_argument("--max-cost", type=float, metavar="USD",
                        help="stop an episode once its model calls cost this much")
    parser.add_argument("--max-tokens", type=int, metavar="N",
                        help="stop an episode once its model calls used this many tokens")
    parser.add_argument("--max-run-cost", type=float, metavar="USD",
                        help="stop the run (no new episodes or steps) at this total cost")
    parser.add_argument("--max-run-tokens", type=int, metavar="N",
                        help="stop the run (no new episodes or steps) at this many tokens")


def add_log_flags(
    parser: argparse.ArgumentParser, *, level: str, json_help: str = "", level_help: str = ""
) -> None:
    parser.add_argument("--log-json", action="store_true",
                        help=json_help or "log JSON lines even on a terminal")
    add_log_level_flag(parser, level, default_help=level_help)


def add_log_level_flag(
    parser: argparse.ArgumentParser, default: str, *, default_help: str = ""
) -> None:
    """``--log-level``: the lowest level of log line shown (``default_help`` explains a
    default that is not a level, such as bench's ``auto``)."""
    choices = LOG_LEVELS if default in LOG_LEVELS else (*LOG_LEVELS, default)
    parser.add_argument("--log-level", default=default, type=log_level, choices=choices,
                        metavar="LEVEL",
                        help=f"the least important log lines shown: {', '.join(choices)} "
                        f"(default {default_help or default})")
