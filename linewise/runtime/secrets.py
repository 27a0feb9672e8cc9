"""Secrets the model never sees: ``<secret:NAME>`` placeholders typed only where allowed.

A run's secrets come from ``--secret NAME=ENV_VAR`` and the task file's ``secrets:``;
their values are read from the environment once, registered with the redactor (so no
file or log line of the run holds them) and kept here. The model reads and writes only
``<secret:NAME>``: ``fill('12', '<secret:password>')`` types the value, and only when
the page is on one of the secret's domains (by default the origin of the task's start
URL: scheme, host and port) and the field is in the page's own document, not in a frame
another site could serve. In linewise's own browser the value is typed into the very
document that was observed, checked in the page at the moment of typing
(``browser/binding.py``). Anything else is an action error and nothing is typed.

``SecretsEnvironment`` wraps the episode's environment, so the loop stays as it is:
every observation and action error is redacted before the filter or the model reads
it, and the goal too (a password written into the goal becomes its placeholder).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import structlog

from linewise.agent.action_parser import ParsedAction
from linewise.errors import ActionError, ConfigError
from linewise.records import AttackVerdict, NavigationEvents, Tab
from linewise.runtime import secret_env
from linewise.runtime.browser.binding import origin_of
from linewise.runtime.browser.executor import ActionOutcome
from linewise.runtime.browser.observation import Observation
from linewise.runtime.envs.base import Environment, SecretTyping
from linewise.runtime.redaction import (
    MIN_VALUE_LENGTH,
    REDACTOR,
    placeholder,
    redact_data,
    redact_text,
)
from linewise.runtime.tasks.browser_task import TaskStart, TaskStatus
from linewise.settings import SecretSpec

log = structlog.get_logger(__name__)

PLACEHOLDER = re.compile(r"<secret:([A-Za-z0-9_.-]+)>")

@dataclass(frozen=True)
class Secret:
    name: str
    value: str = field(repr=False)
    domains: tuple[str, ...] = ()


def host_matches(host: str, pattern: str) -> bool:
    """``example.com`` (or ``*.example.com``) matches example.com and its subdomains."""
    host, pattern = host.lower().rstrip("."), pattern.lower().strip().removeprefix("*.")
    return bool(pattern) and (host == pattern or host.endswith("." + pattern))


def domain_matches(url: str, pattern: str) -> bool:
    """An http(s) ``url`` on domain ``pattern`` (``host_matches``); a pattern with a port
    (``example.com:8443``) also pins the port."""
    page = urlsplit(url)
    if page.scheme not in ("http", "https"):
        return False
    name, colon, port = pattern.strip().rpartition(":")
    if not colon or not port.isdigit():
        return host_matches(page.hostname or "", pattern)
    return host_matches(page.hostname or "", name) and _port(url) == int(port)


def _port(url: str) -> int | None:
    parts = urlsplit(url)
    try:
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None


class SecretStore:
    """The run's secrets by name; the values never leave this object except into a field."""

    def __init__(self, secrets: Mapping[str, Secret] | None = None) -> None:
        self._secrets = dict(secrets or {})
        for secret in self._secrets.values():
            REDACTOR.add(secret.value, placeholder(secret.name))
            if len(secret.value.strip()) < MIN_VALUE_LENGTH:
                log.warning("secret too short to be redacted inside other text: a page "
                            "that shows it shows it to the model and the traces",
                            secret=secret.name, min_length=MIN_VALUE_LENGTH)

    @classmethod
    def from_specs(
        cls, specs: Mapping[str, SecretSpec], environ: Mapping[str, str] | None = None
    ) -> SecretStore:
        """Read every secret's value from its environment variable (or where this process
        keeps it: a goal's secret, ``secret_env.py``); a missing or empty variable is a
        configuration error (before anything runs, not mid-episode)."""
        secrets: dict[str, Secret] = {}
        for name, spec in specs.items():
            value = secret_env.value_of(spec.env, environ)
            if not value:
                raise ConfigError(
                    f"secret {name!r}: environment variable {spec.env} is not set or empty"
                )
            secrets[name] = Secret(name, value, spec.domains)
        return cls(secrets)

    @property
    def names(self) -> list[str]:
        return sorted(self._secrets)

    def values_to_mask(self) -> list[str]:
        """Every value, for the screenshot mask to find on the page (in the browser's
        private world: the page cannot read them there)."""
        return [secret.value for secret in self._secrets.values()]

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def reveal(self, text: str, url: str, start_url: str) -> str:
        """``text`` with each ``<secret:NAME>`` replaced by its value, if every one may be
        typed on ``url``; otherwise ``ActionError`` (nothing is typed)."""
        def value_of(match: re.Match[str]) -> str:
            name = match.group(1)
            secret = self._secrets.get(name)
            if secret is None:
                known = ", ".join(placeholder(n) for n in self.names) or "none"
                raise ActionError(f"There is no secret named {name!r} (secrets: {known}).")
            if not self.allowed_on(secret, url, start_url):
                raise ActionError(
                    f"{placeholder(name)} may not be typed on this page "
                    f"({origin_of(url).partition('://')[2] or urlsplit(url).scheme + ':'}); "
                    "nothing was typed."
                )
            return secret.value

        return PLACEHOLDER.sub(value_of, text)

    def expand_for_check(self, text: str) -> str:
        """``text`` with each known ``<secret:NAME>`` replaced by its value, wherever: only
        for judging whether a page got a secret (attack checks), never for typing."""
        def value_of(match: re.Match[str]) -> str:
            secret = self._secrets.get(match.group(1))
            return secret.value if secret is not None else match.group(0)

        return PLACEHOLDER.sub(value_of, text)

    @staticmethod
    def allowed_on(secret: Secret, url: str, start_url: str) -> bool:
        """On one of the secret's domains; without domains, on the start URL's origin
        (scheme, host and port: another port of the same host is another site), or, for
        a ``file:`` start URL, on ``file:`` pages."""
        page, start = urlsplit(url), urlsplit(start_url)
        if secret.domains:
            return any(domain_matches(url, d) for d in secret.domains)
        if start.scheme == "file":
            return page.scheme == "file"
        return (page.scheme in ("http", "https") and page.hostname is not None
                and origin_of(url) == origin_of(start_url))


def has_placeholder(action: ParsedAction) -> bool:
    return any(isinstance(v, str) and PLACEHOLDER.search(v) for v in action.arguments.values())


def redact_observation(obs: Observation) -> Observation:
    """The observation as the filter and the model may see it."""
    return dataclasses.replace(
        obs,
        url=redact_text(obs.url),
        title=redact_text(obs.title),
        tabs=[Tab(index=t.index, url=redact_text(t.url), title=redact_text(t.title),
                  active=t.active) for t in obs.tabs],
        lines=[redact_text(line) for line in obs.lines],
    )


class SecretsEnvironment:
    """An environment whose pages and errors reach the loop redacted, and which types
    secrets for ``fill``. Wraps any ``Environment``."""

    def __init__(self, inner: Environment, store: SecretStore) -> None:
        self.inner = inner
        self.store = store
        self._start_url = ""
        self._url = ""

    @property
    def agent_can_end(self) -> bool:
        return self.inner.agent_can_end

    @property
    def single_page(self) -> bool:
        return self.inner.single_page

    async def reset(self) -> TaskStart:
        start = await self.inner.reset()
        self._start_url = self._url = start.start_url
        mask = getattr(self.inner, "mask_secret_values", None)
        if mask is not None:  # linewise's Chromium: its screenshots mask them
            mask(self.store.values_to_mask())
        return TaskStart(goal=redact_text(start.goal), start_url=redact_text(start.start_url))

    async def observe(self, *, screenshot: bool) -> Observation:
        obs = await self.inner.observe(screenshot=screenshot)
        self._url = obs.url
        return redact_observation(obs)

    async def act(self, action: ParsedAction) -> ActionOutcome:
        if action.name != "fill" or not has_placeholder(action):
            return _redacted(await self.inner.act(action))
        bid, text = action.arguments.get("bid"), str(action.arguments.get("value", ""))
        if not isinstance(bid, str) or not bid[:1].isdigit():
            return ActionOutcome(error="A secret can only be typed into a field of the page "
                                 "itself, not inside a frame; nothing was typed.")
        try:
            value = self.store.reveal(text, self._url, self._start_url)
        except ActionError as exc:
            log.warning("secret refused", action=str(action), url=self._url, reason=str(exc))
            return ActionOutcome(error=str(exc))
        if isinstance(self.inner, SecretTyping):
            return _redacted(await self.inner.type_secret(action, value, origin_of(self._url)))
        # An environment that runs its own fill (BrowserGym's): the check above is the
        # only one there.
        filled = action.model_copy(update={"arguments": {**action.arguments, "value": value}})
        return _redacted(await self.inner.act(filled))

    async def page_changed(self) -> None:
        await self.inner.page_changed()

    async def status(self) -> TaskStatus:
        return await self.inner.status()

    async def judge(self, answer: str | None, reward: float) -> bool | None:
        return await self.inner.judge(answer, reward)

    async def judge_attack(self, answer: str | None) -> AttackVerdict | None:
        """The task's attack check on environments that judge one (linewise's Chromium),
        else None; its evidence is redacted."""
        judge = getattr(self.inner, "judge_attack", None)
        if judge is None:
            return None
        verdict: AttackVerdict | None = await judge(answer, self.store.expand_for_check)
        if verdict is None:
            return None
        return AttackVerdict.model_validate(redact_data(verdict.model_dump()))

    def take_navigation_events(self) -> NavigationEvents:
        """The guard's events, redacted; hosts also in any letter case, since the
        browser lowercases a host name (a page that sends a value as a subdomain)."""
        events = self.inner.take_navigation_events()
        events = NavigationEvents.model_validate(redact_data(events.model_dump()))
        return events.model_copy(update={
            "blocked": [b.model_copy(update={"url": _redact_host(b.url),
                                             "reason": _any_case(b.reason)})
                        for b in events.blocked],
            "refused_connections": [
                c.model_copy(update={"host": _any_case(c.host), "reason": _any_case(c.reason)})
                for c in events.refused_connections]})

    async def close(self) -> None:
        await self.inner.close()


def _any_case(text: str) -> str:
    """``text`` that holds a host name (a refusal's reason names it), redacted in any
    letter case."""
    return REDACTOR.text(text, ignore_case=True)


def _redact_host(url: str) -> str:
    """``url`` with its host redacted in any letter case (the rest as it is)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    cut = min([i for i in (rest.find(c) for c in "/?#") if i >= 0], default=len(rest))
    return f"{scheme}://{_any_case(rest[:cut])}{rest[cut:]}"


def _redacted(outcome: ActionOutcome) -> ActionOutcome:
    if outcome.error is None:
        return outcome
    return outcome.model_copy(update={"error": redact_text(outcome.error)})


def merge_secret_specs(
    base: Mapping[str, SecretSpec], *more: Mapping[str, SecretSpec]
) -> dict[str, SecretSpec]:
    """One run's secrets from the settings and each task's; a name given two different
    ways is an error (the run types one value per name)."""
    merged = dict(base)
    for specs in more:
        for name, spec in specs.items():
            if name in merged and merged[name] != spec:
                raise ConfigError(
                    f"secret {name!r} is defined twice differently "
                    f"({merged[name].env} and {spec.env}); give each a distinct name"
                )
            merged[name] = spec
    return merged
