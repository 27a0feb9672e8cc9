"""The chat client against a real local HTTP server: records, limits and failures."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from linewise.errors import EndpointUnreachable, LLMError
from linewise.runtime.models.chat import ChatClient
from linewise.settings import EndpointSettings

from .support.concurrency import InFlight
from .support.openai_server import ScriptedChatServer

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


async def test_a_call_is_recorded_with_tokens_and_latency() -> None:
    with ScriptedChatServer(lambda m: "Hello there", delay_s=0.05) as server:
        client = ChatClient(EndpointSettings(base_url=server.base_url, model="m"))
        call = await client.chat(MESSAGES, purpose="retriever")
        await client.close()
    assert call.response == "Hello there" and call.purpose == "retriever"
    assert call.prompt_tokens > 5 and call.completion_tokens == 2
    assert call.latency_ms >= 50 and call.usage is not None
    assert server.requests[0]["messages"] == MESSAGES and server.requests[0]["temperature"] == 0


async def test_requests_in_flight_are_bounded() -> None:
    probe = InFlight()

    def script(messages: list[dict[str, Any]]) -> str:
        with probe.track():
            time.sleep(0.2)
        return "ok"

    with ScriptedChatServer(script) as server:
        client = ChatClient(EndpointSettings(base_url=server.base_url, model="m", max_in_flight=2))
        await asyncio.gather(*(client.chat(MESSAGES) for _ in range(6)))
        await client.close()
    assert probe.peak == 2


async def test_requests_per_second_are_bounded() -> None:
    with ScriptedChatServer(lambda m: "ok") as server:
        client = ChatClient(EndpointSettings(
            base_url=server.base_url, model="m", requests_per_second=2))
        started = time.perf_counter()
        await asyncio.gather(*(client.chat(MESSAGES) for _ in range(5)))
        elapsed = time.perf_counter() - started
        await client.close()
    assert elapsed >= 1.9  # 5 requests at 2/s need at least two full periods


async def test_unreachable_endpoint_names_the_url() -> None:
    client = ChatClient(EndpointSettings(base_url="http://127.0.0.1:9/v1", model="m",
                                         max_retries=0))
    with pytest.raises(EndpointUnreachable) as info:
        await client.chat(MESSAGES)
    assert "http://127.0.0.1:9/v1" in str(info.value)
    assert info.value.call.error  # type: ignore[attr-defined]
    await client.close()


async def test_server_error_is_an_llm_error_with_the_body() -> None:
    def script(messages: list[dict[str, Any]]) -> str:
        raise RuntimeError("model exploded")

    with ScriptedChatServer(script) as server:
        client = ChatClient(EndpointSettings(base_url=server.base_url, model="m", max_retries=0))
        with pytest.raises(LLMError) as info:
            await client.chat(MESSAGES)
        await client.close()
    assert "500" in str(info.value) and "model exploded" in str(info.value)
