"""How a request to an OpenAI-compatible endpoint is tried: one way for every client.

The chat client (``runtime.models.chat.ChatClient``) and the embedding client
(``agent.text.embedders.OpenAIEmbedder``) send their requests through a
:class:`Transport`, so that a fault of the endpoint means the same thing to both.

Requests in flight are bounded by a semaphore and requests per second by
asyncio-throttle. Each try has one deadline, ``timeout_s``, for all of it: the HTTP
client's own timeouts (connect, pool, read and write, each ``timeout_s``) bound every
single wait, and an ``asyncio.timeout`` around the exchange bounds their sum, so an
endpoint that sends a byte now and then (every read well inside the read timeout) is
still cut off at ``timeout_s``. A try cut off is a timeout like any other.

Retries are linewise's, not the openai client's (its ``max_retries`` must be 0, so tries
are never multiplied): a 429, a 5xx, a timeout or a dropped connection is tried again
after a wait that doubles, with jitter (or the endpoint's ``Retry-After``), until
``max_retries`` or the call's ``retry_budget_s`` runs out; then the last fault is raised:
``EndpointUnreachable`` when nothing answered, else ``LLMError``. A 401/403, or a 404
naming the model, is ``EndpointRefused`` at once; a refusal of an oversized request is
``ContextOverflow``; any other error status is an ``LLMError`` carrying the status.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TypeVar

import openai
import structlog
from asyncio_throttle.throttler import Throttler

from linewise.errors import ContextOverflow, EndpointRefused, EndpointUnreachable, LLMError
from linewise.settings import EndpointSettings

log = structlog.get_logger(__name__)

T = TypeVar("T")

RETRIED_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
"""Statuses that say "not now" rather than "never"."""

REFUSED_STATUSES = frozenset({401, 403})

_CONTEXT_OVERFLOW = re.compile(
    r"context[ _](length|size|window)|maximum context|exceeds? the (available )?context"
    r"|context_length_exceeded|prompt is too long|too many tokens", re.IGNORECASE)
"""How llama.cpp ("exceeds the available context size"), vLLM and OpenAI ("maximum
context length", ``context_length_exceeded``) and others refuse an oversized request."""


class Transport:
    """The tries of every request to one endpoint (see the module).

    ``what`` names the endpoint in error messages ("LLM endpoint", "Embedding
    endpoint"); ``base_url`` and ``model`` are the ones the errors name;
    ``context_tokens`` is what a ``ContextOverflow`` says the prompts were fitted to.
    """

    def __init__(self, endpoint: EndpointSettings, *, base_url: str, model: str,
                 what: str = "LLM endpoint", context_tokens: int | None = None) -> None:
        self.endpoint = endpoint
        self.base_url = base_url
        self.model = model
        self.what = what
        self.context_tokens = context_tokens
        self._in_flight = asyncio.Semaphore(endpoint.max_in_flight)
        self._throttler = _throttler(endpoint.requests_per_second)

    async def call(self, send: Callable[[], Awaitable[T]]) -> T:
        """``send()``'s result, tried again after a passing fault (see the module)."""
        deadline = time.monotonic() + self.endpoint.retry_budget_s
        retry = 0
        while True:
            try:
                return await self._try_once(send)
            except _Retryable as fault:
                wait = self._wait_before_retry(retry, fault.retry_after_s)
                if retry >= self.endpoint.max_retries or time.monotonic() + wait > deadline:
                    raise fault.error from fault.error.__cause__
                retry += 1
                log.info("llm call retried", base_url=self.base_url, retry=retry,
                         wait_s=round(wait, 2), error=str(fault.error))
                await asyncio.sleep(wait)

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        async with self._in_flight:
            if self._throttler is None:
                yield
            else:
                async with self._throttler:
                    yield

    def _wait_before_retry(self, retry: int, retry_after: float | None) -> float:
        """The endpoint's Retry-After when it sent one, else exponential with jitter."""
        if retry_after is not None:
            return max(0.0, retry_after)
        ceiling = min(self.endpoint.backoff_max_s, self.endpoint.backoff_initial_s * 2 ** retry)
        return random.uniform(ceiling / 2, ceiling)

    async def _try_once(self, send: Callable[[], Awaitable[T]]) -> T:
        """One try, within ``timeout_s`` from its request to its body's last byte (the
        wait for a slot of ``max_in_flight`` and the throttle is not the endpoint's)."""
        try:
            async with self._slot(), asyncio.timeout(self.endpoint.timeout_s):
                return await send()
        except (openai.APITimeoutError, TimeoutError) as exc:
            error = LLMError(
                f"{self.what} {self.base_url} timed out after {self.endpoint.timeout_s:g} s"
            )
            error.__cause__ = exc
            raise _Retryable(error, None) from exc
        except openai.APIConnectionError as exc:
            unreachable = EndpointUnreachable(self.base_url, str(exc.__cause__ or exc))
            unreachable.__cause__ = exc
            raise _Retryable(unreachable, None) from exc
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from exc

    def _status_error(self, exc: openai.APIStatusError) -> Exception:
        status = exc.status_code
        body = str(exc.body or exc.message)[:500]
        if status in REFUSED_STATUSES or (status == 404 and _names_model(body, self.model)):
            return EndpointRefused(self.base_url, self.model, status, body)
        if status in (400, 413, 500) and _CONTEXT_OVERFLOW.search(body):
            return ContextOverflow(self.base_url, self.context_tokens, body[:300])
        error = LLMError(
            f"{self.what} {self.base_url} answered {status} for model {self.model!r}: {body}",
            status=status,
        )
        if status in RETRIED_STATUSES:
            error.__cause__ = exc
            return _Retryable(error, retry_after_s(exc.response.headers))
        return error


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
    """A 404 means an unknown model when the body says so (OpenAI: ``model_not_found``;
    vLLM and llama.cpp name the model)."""
    lowered = body.lower()
    return "model" in lowered and ("not found" in lowered or "not_found" in lowered
                                   or "does not exist" in lowered or model.lower() in lowered)


def _throttler(requests_per_second: float | None) -> Throttler | None:
    """asyncio-throttle counts whole requests per period: 0.5/s is 1 request per 2 s."""
    if not requests_per_second:
        return None
    if requests_per_second >= 1:
        return Throttler(rate_limit=int(requests_per_second), period=1.0)
    return Throttler(rate_limit=1, period=1.0 / requests_per_second)
