"""Chat calls to any OpenAI-compatible endpoint, bounded: a ``ChatModel`` over HTTP.

``ChatClient`` wraps ``openai.AsyncOpenAI``: requests in flight are bounded by a
semaphore and requests per second by asyncio-throttle. Transport failures become
``LLMError``s; the trace record of a call is built by ``agent.models.call_model``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import openai
from asyncio_throttle.throttler import Throttler

from linewise.agent.models import Completion, TokenLogprob, Usage
from linewise.errors import EndpointUnreachable, LLMError
from linewise.settings import EndpointSettings


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

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Completion:
        """Send one chat completion (the ``ChatModel`` protocol).

        ``params`` go to the API as they are (``response_format``, ``stop``,
        ``extra_body``…); ``temperature`` and ``max_tokens`` default to the endpoint's.
        ``logprobs=True`` also asks for the top token, and the answer's token logprobs
        come back in the completion (choice 0). Raises ``EndpointUnreachable`` when
        nothing answers and ``LLMError`` for a timeout or an error status.
        """
        params.setdefault("temperature", self.endpoint.temperature)
        params.setdefault("max_tokens", self.endpoint.max_tokens)
        if params.get("logprobs"):
            params.setdefault("top_logprobs", 1)
        try:
            async with self._slot():
                response = await self._client.chat.completions.create(
                    model=self.model, messages=messages, **params  # type: ignore[arg-type]
                )
        except openai.APITimeoutError as exc:
            raise LLMError(
                f"LLM endpoint {self.base_url} timed out after {self.endpoint.timeout_s:.0f} s"
            ) from exc
        except openai.APIConnectionError as exc:
            raise EndpointUnreachable(self.base_url, str(exc.__cause__ or exc)) from exc
        except openai.APIStatusError as exc:
            body = str(exc.body or exc.message)[:500]
            raise LLMError(
                f"LLM endpoint {self.base_url} answered {exc.status_code} for model "
                f"{self.model!r}: {body}", status=exc.status_code,
            ) from exc
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content if choice and choice.message else None) or ""
        usage = (Usage.model_validate(response.usage.model_dump(exclude_none=True))
                 if response.usage is not None else None)
        content = choice.logprobs.content if choice and choice.logprobs else None
        logprobs = ([TokenLogprob(token=item.token, logprob=item.logprob) for item in content]
                    if content else None)
        return Completion(text=text, usage=usage, logprobs=logprobs)

    async def close(self) -> None:
        await self._client.close()


def _throttler(requests_per_second: float | None) -> Throttler | None:
    """asyncio-throttle counts whole requests per period: 0.5/s is 1 request per 2 s."""
    if not requests_per_second:
        return None
    if requests_per_second >= 1:
        return Throttler(rate_limit=int(requests_per_second), period=1.0)
    return Throttler(rate_limit=1, period=1.0 / requests_per_second)
