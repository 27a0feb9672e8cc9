"""The model interface: the call record ``call_model`` builds, and ``ChatClient`` against a
real local HTTP server (limits and failures)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from linewise.agent.models import Completion, Usage, call_model
from linewise.errors import EndpointUnreachable, LLMError
from linewise.runtime.models.chat import ChatClient
from linewise.settings import EndpointSettings
from linewise.testing import CallInfo, FunctionModel, ScriptedChatServer
from linewise.tokens import count_message_tokens
from tests.support.concurrency import InFlight

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


async def test_a_call_is_recorded_with_tokens_and_latency() -> None:
    with ScriptedChatServer(lambda m: "Hello there", delay_s=0.05) as server:
        client = ChatClient(EndpointSettings(base_url=server.base_url, model="m"))
        call = await call_model(client, MESSAGES, purpose="retriever", attempt=1)
        await client.close()
    assert call.response == "Hello there" and call.purpose == "retriever" and call.attempt == 1
    assert call.model == "m" and call.base_url == server.base_url
    assert call.prompt_tokens > 5 and call.completion_tokens == 2
    assert call.latency_ms >= 50 and call.error is None
    assert call.usage == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert server.requests[0]["messages"] == MESSAGES and server.requests[0]["temperature"] == 0


async def test_a_model_without_usage_still_gets_token_counts() -> None:
    model = FunctionModel(lambda messages, info: "Hello there", model="in-process")
    call = await call_model(model, MESSAGES, temperature=0.5)
    assert call.response == "Hello there" and call.model == "in-process" and call.base_url == ""
    assert call.prompt_tokens == count_message_tokens(MESSAGES) > 5
    assert call.completion_tokens == 2 and call.usage is None
    assert model.requests[0].messages == MESSAGES
    assert model.requests[0].params == {"temperature": 0.5}


async def test_reported_usage_is_kept_beside_the_counts() -> None:
    def answer(messages: list[dict[str, Any]], info: CallInfo) -> Completion:
        return Completion(text="Hi", usage=Usage(prompt_tokens=40, completion_tokens=3))

    call = await call_model(FunctionModel(answer), MESSAGES)
    assert call.usage == {"prompt_tokens": 40, "completion_tokens": 3}
    assert call.prompt_tokens == count_message_tokens(MESSAGES) and call.completion_tokens == 1


async def test_a_failed_call_raises_with_its_partial_record() -> None:
    def refuse(messages: list[dict[str, Any]], info: CallInfo) -> str:
        raise LLMError("context too long", status=400)

    with pytest.raises(LLMError) as info:
        await call_model(FunctionModel(refuse), MESSAGES, purpose="retriever", attempt=2)
    assert info.value.status == 400 and str(info.value) == "context too long"
    call = info.value.call
    assert call is not None and call.error == "context too long"
    assert call.messages == MESSAGES and call.purpose == "retriever" and call.attempt == 2
    assert call.response is None and call.prompt_tokens > 5


async def test_a_fixed_list_of_answers_runs_out_with_an_llm_error() -> None:
    model = FunctionModel.answering(["one", "two"])
    assert [(await call_model(model, MESSAGES)).response for _ in range(2)] == ["one", "two"]
    with pytest.raises(LLMError, match="no answer left for call 3"):
        await call_model(model, MESSAGES)


async def test_requests_in_flight_are_bounded() -> None:
    probe = InFlight()

    def script(messages: list[dict[str, Any]]) -> str:
        with probe.track():
            time.sleep(0.2)
        return "ok"

    with ScriptedChatServer(script) as server:
        client = ChatClient(EndpointSettings(base_url=server.base_url, model="m", max_in_flight=2))
        await asyncio.gather(*(client.complete(MESSAGES) for _ in range(6)))
        await client.close()
    assert probe.peak == 2


@pytest.mark.slow
async def test_requests_per_second_are_bounded() -> None:
    with ScriptedChatServer(lambda m: "ok") as server:
        client = ChatClient(EndpointSettings(
            base_url=server.base_url, model="m", requests_per_second=2))
        started = time.perf_counter()
        await asyncio.gather(*(client.complete(MESSAGES) for _ in range(5)))
        elapsed = time.perf_counter() - started
        await client.close()
    assert elapsed >= 1.9  # 5 requests at 2/s need at least two full periods


async def test_unreachable_endpoint_names_the_url() -> None:
    client = ChatClient(EndpointSettings(base_url="http://127.0.0.1:9/v1", model="m",
                                         max_retries=0))
    with pytest.raises(EndpointUnreachable) as info:
        await call_model(client, MESSAGES)
    await client.close()
    assert "http://127.0.0.1:9/v1" in str(info.value)
    assert info.value.base_url == "http://127.0.0.1:9/v1"
    call = info.value.call
    assert call is not None and call.error == str(info.value)
    assert call.base_url == "http://127.0.0.1:9/v1" and call.latency_ms > 0


async def test_server_error_is_an_llm_error_with_the_body_and_status() -> None:
    def script(messages: list[dict[str, Any]]) -> str:
        raise RuntimeError("model exploded")

    with ScriptedChatServer(script) as server:
        client = ChatClient(EndpointSettings(base_url=server.base_url, model="m", max_retries=0))
        with pytest.raises(LLMError) as direct:
            await client.complete(MESSAGES)
        with pytest.raises(LLMError) as recorded:
            await call_model(client, MESSAGES)
        await client.close()
    assert "500" in str(direct.value) and "model exploded" in str(direct.value)
    assert direct.value.status == 500 and direct.value.call is None
    assert recorded.value.status == 500 and recorded.value.call is not None
    assert "model exploded" in (recorded.value.call.error or "")
