"""The embedded model for real: its llama.cpp server answers a chat completion, then
takes one real step in Chromium on a MiniWoB page; one server start for both (loading
the model is most of the cost), stopped and reaped at the end."""

from __future__ import annotations

import os
from pathlib import Path

import openai
import pytest

from linewise.agent.action_parser import parse_action
from linewise.axtree import bids_in
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.models.files import ensure_embedded_model
from linewise.runtime.models.local_server import LocalModelServer
from linewise.runtime.run import LOCAL_TIMEOUT_S
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.runtime.tasks.schema import MiniWoBTask
from linewise.runtime.trace import read_steps
from linewise.settings import EndpointSettings
from tests.support.episodes import resources_of, run_episode


@pytest.mark.slow
async def test_the_embedded_model_answers_a_chat_completion_and_takes_a_real_step(
    browser: Browser, miniwob_server: MiniWoBServer, tmp_path: Path
) -> None:
    model = ensure_embedded_model()
    async with LocalModelServer(
        model, ctx_size=8192, log_path=tmp_path / "server.log") as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        pid = server.pid
        assert pid is not None
        # a plain chat completion, as any OpenAI client sends it
        raw = openai.AsyncOpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        try:
            reply = await raw.chat.completions.create(
                model=server.model_name,
                messages=[{"role": "user", "content": "Reply with the single word: ready"}],
                max_tokens=8,
                temperature=0,
            )
        finally:
            await raw.close()
        # as open_endpoints sets up the embedded model: its long timeout, no retries
        client = ChatClient(EndpointSettings(
            base_url=server.base_url, model=server.model_name, max_tokens=128,
            timeout_s=LOCAL_TIMEOUT_S, max_retries=0), embedded=True)
        env = resources_of(browser, client, miniwob_server)
        task = MiniWoBTask(miniwob="click-test", seed=1, max_steps=1)
        summary = await run_episode(task, env, tmp_path)
        await client.close()
    assert reply.choices[0].message.content
    assert reply.model == server.model_name
    assert reply.usage is not None
    assert reply.usage.prompt_tokens > 5 and 0 < reply.usage.completion_tokens <= 8
    assert not server.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped: the memory is back
    assert summary.status == "finished", summary.error
    [step] = read_steps(tmp_path / task.id)
    call = step.llm_calls[0]
    assert call.model == server.model_name and call.response
    assert call.usage and call.usage["prompt_tokens"] > 500
    # llama.cpp compiled the action grammar over the page's bids: the answer is one
    # valid call, and any element it names is one the view showed
    assert step.action_decoding == "grammar" and step.parse_error is None
    assert step.action is not None and len(step.llm_calls) == 1
    assert set(parse_action(step.action).bids) <= set(bids_in(step.observation))
    # the model may or may not solve it; the outcome is recorded either way
    assert summary.success in (True, False) and summary.n_steps == 1
