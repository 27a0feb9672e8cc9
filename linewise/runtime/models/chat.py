"""Chat calls to any OpenAI-compatible endpoint, bounded and recorded.

``ChatClient`` wraps ``openai.AsyncOpenAI``: requests in flight are bounded by a
semaphore and requests per second by asyncio-throttle; every call, failed or not,
comes back as an ``LLMCall`` record with the messages, the raw answer, tiktoken counts,
what the server reported and the latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import openai
import structlog
from asyncio_throttle import Throttler

from linewise.errors import EndpointUnreachable, LLMError
from linewise.records import LLMCall
from linewise.settings import EndpointSettings
from linewise.tokens import count_message_tokens, count_tokens

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class TokenLogprob:
    """One answer token and its log-probability under the model."""

    token: str
    logprob: float


class ChatClient:
    """One endpoint and model. Safe to share between concurrent episodes."""

    def __init__(self, endpoint: EndpointSettings) -> None:
        if not endpoint.base_url or not endpoint.model:
            raise LLMError("ChatClient needs a base URL and a model")
        self.endpoint = endpoint
        self.base_url: str = endpoint.base_url
        self.model: str = endpoint.model
        self._client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or "not-needed",
            timeout=endpoint.timeout_s,
            max_retries=endpoint.max_retries,
        )
        self._in_flight = asyncio.Semaphore(endpoint.max_in_flight)
        self._throttler = _throttler(endpoint.requests_per_second)

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        async with self._in_flight:
            if self._throttler is None:
                yield
            else:
                async with self._throttler:
                    yield

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        purpose: str = "action",
        attempt: int = 0,
        **params: Any,
    ) -> LLMCall:
        """Send one chat completion. Transport failures raise; the record is attached.

        ``params`` go to the API as they are (``response_format``, ``logprobs``, ``stop``…).
        Raises ``EndpointUnreachable`` when nothing answers and ``LLMError`` for an error
        status; the partial ``LLMCall`` is on the exception as ``.call``.
        """
        record, _ = await self._complete(messages, purpose, attempt, params)
        return record

    async def chat_with_logprobs(
        self,
        messages: list[dict[str, Any]],
        *,
        purpose: str = "other",
        attempt: int = 0,
        **params: Any,
    ) -> tuple[LLMCall, list[TokenLogprob] | None]:
        """``chat`` asking for the log-probability of every answer token (choice 0).

        The second value is ``None`` when the endpoint sent no logprobs (not every server
        implements them); errors are those of ``chat``.
        """
        params["logprobs"] = True
        params.setdefault("top_logprobs", 1)
        record, response = await self._complete(messages, purpose, attempt, params)
        choice = response.choices[0] if response.choices else None
        content = choice.logprobs.content if choice and choice.logprobs else None
        if not content:
            return record, None
        return record, [TokenLogprob(token=item.token, logprob=item.logprob) for item in content]

    async def _complete(
        self, messages: list[dict[str, Any]], purpose: str, attempt: int, params: dict[str, Any]
    ) -> tuple[LLMCall, Any]:
        params.setdefault("temperature", self.endpoint.temperature)
        params.setdefault("max_tokens", self.endpoint.max_tokens)
        record = LLMCall(
            purpose=purpose if purpose in ("action", "retriever") else "other",  # type: ignore[arg-type]
            model=self.model,
            base_url=self.base_url,
            messages=messages,
            prompt_tokens=count_message_tokens(messages),
            attempt=attempt,
        )
        started = time.perf_counter()
        try:
            async with self._slot():
                response = await self._client.chat.completions.create(
                    model=self.model, messages=messages, **params  # type: ignore[arg-type]
                )
        except openai.APITimeoutError as exc:
            raise self._fail(record, started, LLMError(
                f"LLM endpoint {self.base_url} timed out after {self.endpoint.timeout_s:.0f} s"
            ), exc) from exc
        except openai.APIConnectionError as exc:
            raise self._fail(record, started, EndpointUnreachable(
                self.base_url, str(exc.__cause__ or exc)
            ), exc) from exc
        except openai.APIStatusError as exc:
            body = str(exc.body or exc.message)[:500]
            raise self._fail(record, started, LLMError(
                f"LLM endpoint {self.base_url} answered {exc.status_code} for model "
                f"{self.model!r}: {body}", status=exc.status_code,
            ), exc) from exc
        record.latency_ms = (time.perf_counter() - started) * 1000
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content if choice and choice.message else None) or ""
        record.response = text
        record.completion_tokens = count_tokens(text)
        if response.usage is not None:
            record.usage = response.usage.model_dump(exclude_none=True)
        return record, response

    def _fail(
        self, record: LLMCall, started: float, error: LLMError, cause: Exception
    ) -> LLMError:
        record.latency_ms = (time.perf_counter() - started) * 1000
        record.error = str(error)
        error.call = record  # type: ignore[attr-defined]
        log.warning("llm call failed", base_url=self.base_url, error=str(error))
        return error

    async def close(self) -> None:
        await self._client.close()


def _throttler(requests_per_second: float | None) -> Throttler | None:
    """asyncio-throttle counts whole requests per period: 0.5/s is 1 request per 2 s."""
    if not requests_per_second:
        return None
    if requests_per_second >= 1:
        return Throttler(rate_limit=int(requests_per_second), period=1.0)
    return Throttler(rate_limit=1, period=1.0 / requests_per_second)
