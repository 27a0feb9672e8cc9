"""Chat calls to any OpenAI-compatible endpoint, bounded: a ``ChatModel`` over HTTP.

``ChatClient`` wraps ``openai.AsyncOpenAI``: requests in flight are bounded by a
semaphore and requests per second by asyncio-throttle. Transport failures become
``LLMError``s; the trace record of a call is built by ``agent.models.call_model``.

Each try has one deadline, ``timeout_s``, for all of it: the HTTP client's own timeouts
(connect, pool, read and write, each ``timeout_s``) bound every single wait, and an
``asyncio.timeout`` around the exchange bounds their sum, so an endpoint that sends a
byte now and then (every read well inside the read timeout) is still cut off at
``timeout_s``. A try cut off is a timeout like any other: retried, then ``LLMError``.

Retries are linewise's, not the openai client's (its ``max_retries`` is 0, so tries
are never multiplied): a 429, a 5xx, a timeout or a dropped connection is tried again
after a wait that doubles, with jitter (or the endpoint's ``Retry-After``), until
``max_retries`` or the call's ``retry_budget_s`` runs out. A 401/403, or a 404 naming
the model, is ``EndpointRefused`` at once; a 200 whose body is not a chat completion is
``InvalidResponse`` with the body kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import random
import re
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import openai
import structlog
from asyncio_throttle.throttler import Throttler
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from linewise.agent.constraint import ConstraintKind
from linewise.agent.models import Completion, TokenLogprob, Usage
from linewise.agent.profile import ModelProfile
from linewise.errors import (
    ContextOverflow,
    EndpointRefused,
    EndpointUnreachable,
    InvalidResponse,
    LLMError,
)
from linewise.runtime.models.profiles import EMBEDDED, resolve_profile
from linewise.settings import EndpointSettings

log = structlog.get_logger(__name__)

RETRIED_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
"""Statuses that say "not now" rather than "never"."""

REFUSED_STATUSES = frozenset({401, 403})

PROBE_TIMEOUT_S = 10.0

_CONTEXT_OVERFLOW = re.compile(
    r"context[ _](length|size|window)|maximum context|exceeds? the (available )?context"
    r"|context_length_exceeded|prompt is too long|too many tokens", re.IGNORECASE)
"""How llama.cpp ("exceeds the available context size"), vLLM and OpenAI ("maximum
context length", ``context_length_exceeded``) and others refuse an oversized request."""


class ChatClient:
    """One endpoint and model. Safe to share between concurrent episodes.

    ``profile`` is what the model takes and needs (``agent.profile``); every caller
    reads it, and constraints reach the endpoint in the request fields it names. The
    client also remembers which constraint kinds its endpoint refused
    (``refused_constraints``, see ``agent.structured``): each client its own.
    """

    def __init__(self, endpoint: EndpointSettings, *, profile: ModelProfile | None = None,
                 embedded: bool = False) -> None:
        """``profile``: resolved by the caller (``runtime.models.factory`` resolves it
        from the run's settings); without one it is resolved from ``endpoint`` alone
        (``profiles.resolve_profile``). ``embedded`` (deprecated: set the endpoint's
        ``profile`` to ``embedded``): the endpoint is linewise's own llama.cpp server."""
        if not endpoint.base_url or not endpoint.model:
            raise LLMError("ChatClient needs a base URL and a model")
        self.base_url: str = endpoint.base_url
        self.model: str = endpoint.model
        if embedded and endpoint.profile == "auto":
            endpoint = endpoint.model_copy(update={"profile": EMBEDDED})
        self.endpoint = endpoint
        self.profile: ModelProfile = profile or resolve_profile(endpoint)
        self.refused_constraints: set[ConstraintKind] = set()
        """The constraint kinds this endpoint refused (asked without them from then on)."""
        self._client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or "not-needed",
            timeout=endpoint.timeout_s,  # connect, pool, read and write: each wait
            max_retries=0,
        )
        self._in_flight = asyncio.Semaphore(endpoint.max_in_flight)
        self._throttler = _throttler(endpoint.requests_per_second)

    @property
    def context_tokens(self) -> int:
        """The context the prompts are fitted into (the profile's)."""
        return self.profile.context_tokens

    @property
    def answer_tokens(self) -> int:
        return self.profile.answer_tokens

    @property
    def embedded(self) -> bool:
        """Deprecated: read ``profile``. Whether the profile is the embedded model's."""
        return self.profile.name == EMBEDDED

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        async with self._in_flight:
            if self._throttler is None:
                yield
            else:
                async with self._throttler:
                    yield

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Completion:
        """Send one chat completion (the ``ChatModel`` protocol).

        ``params`` go to the API as they are (``response_format``, ``stop``,
        ``extra_body``…); ``temperature`` and ``max_tokens`` default to the endpoint's.
        ``logprobs=True`` also asks for the top token, and the answer's token logprobs
        come back in the completion (choice 0). Transient faults are retried (see the
        module); what is left raises ``EndpointUnreachable`` (nothing answers),
        ``EndpointRefused`` (key or model refused), ``InvalidResponse`` (a body that is
        not a completion) or ``LLMError`` (a timeout or an error status).
        """
        params.setdefault("temperature", self.endpoint.temperature)
        params.setdefault("max_tokens", self.endpoint.max_tokens)
        if params.get("logprobs"):
            params.setdefault("top_logprobs", 1)
        deadline = time.monotonic() + self.endpoint.retry_budget_s
        retry = 0
        while True:
            try:
                return await self._try_once(messages, params)
            except _Retryable as fault:
                wait = self._wait_before_retry(retry, fault.retry_after_s)
                if retry >= self.endpoint.max_retries or time.monotonic() + wait > deadline:
                    raise fault.error from fault.error.__cause__
                retry += 1
                log.info("llm call retried", base_url=self.base_url, retry=retry,
                         wait_s=round(wait, 2), error=str(fault.error))
                await asyncio.sleep(wait)

    def _wait_before_retry(self, retry: int, retry_after_s: float | None) -> float:
        """The endpoint's Retry-After when it sent one, else exponential with jitter."""
        if retry_after_s is not None:
            return max(0.0, retry_after_s)
        ceiling = min(self.endpoint.backoff_max_s, self.endpoint.backoff_initial_s * 2 ** retry)
        return random.uniform(ceiling / 2, ceiling)

    async def _try_once(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        """One try, within ``timeout_s`` from its request to its body's last byte (the
        wait for a slot of ``max_in_flight`` and the throttle is not the endpoint's)."""
        try:
            async with self._slot(), asyncio.timeout(self.endpoint.timeout_s):
                raw = await self._client.chat.completions.with_raw_response.create(
                    model=self.model, messages=messages, **params  # type: ignore[arg-type]
                )
                body = raw.text
        except (openai.APITimeoutError, TimeoutError) as exc:
            error = LLMError(
                f"LLM endpoint {self.base_url} timed out after {self.endpoint.timeout_s:g} s"
            )
            error.__cause__ = exc
            raise _Retryable(error, None) from exc
        except openai.APIConnectionError as exc:
            unreachable = EndpointUnreachable(self.base_url, str(exc.__cause__ or exc))
            unreachable.__cause__ = exc
            raise _Retryable(unreachable, None) from exc
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from exc
        return self._completion(body)

    def _status_error(self, exc: openai.APIStatusError) -> Exception:
        status = exc.status_code
        body = str(exc.body or exc.message)[:500]
        if status in REFUSED_STATUSES or (status == 404 and _names_model(body, self.model)):
            return EndpointRefused(self.base_url, self.model, status, body)
        if status in (400, 413, 500) and _CONTEXT_OVERFLOW.search(body):
            return ContextOverflow(self.base_url, self.context_tokens, body[:300])
        error = LLMError(
            f"LLM endpoint {self.base_url} answered {status} for model {self.model!r}: {body}",
            status=status,
        )
        if status in RETRIED_STATUSES:
            error.__cause__ = exc
            return _Retryable(error, retry_after_s(exc.response.headers))
        return error

    def _completion(self, body: str) -> Completion:
        """The completion in a 200 body, or ``InvalidResponse`` keeping the body."""
        try:
            response = ChatCompletion.model_validate(json.loads(body))
        except (json.JSONDecodeError, ValidationError, TypeError) as exc:
            raise InvalidResponse(self.base_url, f"not a chat completion ({exc})"[:300],
                                  body) from exc
        if not response.choices:
            raise InvalidResponse(self.base_url, "the completion has no choices", body)
        choice = response.choices[0]
        text = (choice.message.content if choice.message else None) or ""
        usage = (Usage.model_validate(response.usage.model_dump(exclude_none=True))
                 if response.usage is not None else None)
        content = choice.logprobs.content if choice.logprobs else None
        logprobs = ([TokenLogprob(token=item.token, logprob=item.logprob) for item in content]
                    if content else None)
        return Completion(text=text, usage=usage, logprobs=logprobs)

    async def probe(self) -> str | None:
        """One cheap request (the model list), untried again: the one check of an
        endpoint, before a run and while a bench waits out an outage. Returns when the
        endpoint answers at all, raises ``EndpointRefused`` when it refuses the key and
        ``EndpointUnreachable`` when nothing answers (a refused connection, a timeout).

        Returns who the list says serves the model (its ``owned_by``: ``llamacpp``,
        ``vllm``…, the entry of this model's name, else the first), or None: what
        ``profiles.resolve_profile`` reads when the endpoint's profile is ``auto``.

        Any status but 401/403 counts as an answer: a 404 (not every server lists
        models), and a 5xx too, which on a server that answers is most often a passing
        fault that the chat calls' own retries ride out. An unknown model is found by
        the first chat call (``EndpointRefused`` too)."""
        timeout_s = min(PROBE_TIMEOUT_S, self.endpoint.timeout_s)
        try:
            async with asyncio.timeout(timeout_s):
                listed = await self._client.models.list(timeout=timeout_s)
        except TimeoutError as exc:
            raise EndpointUnreachable(self.base_url, f"no answer in {timeout_s:g} s") from exc
        except openai.APIConnectionError as exc:  # the client's own timeouts included
            raise EndpointUnreachable(self.base_url, str(exc.__cause__ or exc)) from exc
        except openai.APIStatusError as exc:
            if exc.status_code in REFUSED_STATUSES:
                raise EndpointRefused(self.base_url, self.model, exc.status_code,
                                      str(exc.body or exc.message)[:300]) from exc
            return None
        return _owner(getattr(listed, "data", None) or [], self.model)

    async def close(self) -> None:
        await self._client.close()


class _Retryable(Exception):
    """A try that may be repeated: the error it ends with if it is not, and how long
    the endpoint asked us to wait."""

    def __init__(self, error: LLMError, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after_s = retry_after


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from a ``Retry-After`` (seconds or an HTTP date) or the
    ``retry-after-ms`` some APIs send; None when absent or unreadable."""
    if (millis := headers.get("retry-after-ms")) is not None:
        with contextlib.suppress(ValueError):
            return float(millis) / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def _names_model(body: str, model: str) -> bool:
    """A 404 on chat completions means an unknown model when the body says so (OpenAI:
    ``model_not_found``; vLLM and llama.cpp name the model)."""
    lowered = body.lower()
    return "model" in lowered and ("not found" in lowered or "not_found" in lowered
                                   or "does not exist" in lowered or model.lower() in lowered)


def _owner(models: list[Any], name: str) -> str | None:
    """The ``owned_by`` of the listed model called ``name``, else of the first."""
    chosen = next((m for m in models if getattr(m, "id", None) == name),
                  models[0] if models else None)
    owner = getattr(chosen, "owned_by", None)
    return owner if isinstance(owner, str) and owner else None


def _throttler(requests_per_second: float | None) -> Throttler | None:
    """asyncio-throttle counts whole requests per period: 0.5/s is 1 request per 2 s."""
    if not requests_per_second:
        return None
    if requests_per_second >= 1:
        return Throttler(rate_limit=int(requests_per_second), period=1.0)
    return Throttler(rate_limit=1, period=1.0 / requests_per_second)
