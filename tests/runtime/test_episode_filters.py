"""An episode per filter: the scripted model acts on the filtered view, all recorded."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from linewise.agent.filters.registry import FilterContext, filter_maker, shared_embedder
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.episode import EpisodeConfig
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.runtime.tasks.schema import MiniWoBTask
from linewise.runtime.trace import read_steps
from linewise.settings import EndpointSettings, FilterSettings
from linewise.testing import ScriptedChatServer, miniwob_solver
from tests.support.episodes import resources_of, run_episode


def retriever_or_actor(messages: list[dict[str, Any]]) -> str:
    """Retriever calls keep the button lines; action calls go to the MiniWoB solver."""
    if "extract the relevant information" in messages[0]["content"]:
        prompt = messages[-1]["content"]
        numbers = [int(m.group(1)) for m in re.finditer(r"^(\d+)\|.*button", prompt, re.M)]
        pairs = ", ".join(f"({n}, {n})" for n in numbers) or "(1, 1)"
        return f"<think>The buttons.</think><answer>[{pairs}]</answer>"
    return miniwob_solver(messages)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["none", "truncate", "embedding", "lines", "lines+structure"])
async def test_episode_with_filter(
    name: str, browser: Browser, miniwob_server: MiniWoBServer, tmp_path: Path
) -> None:
    with ScriptedChatServer(retriever_or_actor) as llm:
        chat = ChatClient(EndpointSettings(base_url=llm.base_url, model="scripted"))
        settings = FilterSettings(name=name, cost_gate=False, json_schema="off")
        context = FilterContext(settings, retriever=chat, embedder=shared_embedder(settings))
        config = EpisodeConfig(make_filter=filter_maker(context))
        env = resources_of(browser, chat, miniwob_server)
        task = MiniWoBTask(miniwob="click-button", seed=3, max_steps=3)
        summary = await run_episode(task, env, tmp_path, config)
        await chat.close()
    assert summary.success is True and summary.filter == name
    [step] = read_steps(tmp_path / task.id)
    record = step.filter_result
    assert step.filter == record.name == name and record.total_lines == step.axtree_lines
    assert step.obs_tokens_full == record.tokens_full > 0
    purposes = [c.purpose for c in step.llm_calls]
    if name.startswith("lines"):
        assert purposes == ["retriever", "action"] and record.ranges
        assert record.retriever_prompt_tokens > 0 and summary.tokens.retriever_prompt > 0
        assert step.observation != "\n".join(line.split("|", 1)[1]
                                             for line in step.axtree.splitlines())
        assert record.reduction > 0 and step.obs_tokens_shown < step.obs_tokens_full
        assert not record.misses  # the clicked button was shown
    else:  # the page fits the truncation budget: both show the whole tree
        assert purposes == ["action"] and summary.tokens.retriever_prompt == 0
        assert step.observation == "\n".join(
            line.split("|", 1)[1] for line in step.axtree.splitlines())
        assert record.reduction == 0
    assert summary.obs_tokens_full == step.obs_tokens_full


@pytest.mark.slow
async def test_a_filter_miss_is_resolved_and_recorded(
    browser: Browser, miniwob_server: MiniWoBServer, tmp_path: Path
) -> None:
    """The retriever hides the target button; the model names it anyway: it works, and is
    a miss."""

    def script(messages: list[dict[str, Any]]) -> str:
        if "extract the relevant information" in messages[0]["content"]:
            return "<answer>[(7, 7)]</answer>"
        return f"<action>click('{hidden_bid[0]}')</action>"

    hidden_bid: list[str] = []

    async def find_button_bid() -> None:
        session = await browser.new_session()
        from linewise.runtime.browser.extraction import observe
        from linewise.runtime.tasks.miniwob import start_miniwob_episode

        await start_miniwob_episode(session.page, "click-button", 0, miniwob_server)
        obs = await observe(session, screenshot=False)
        # the goal's button ('no'), the first of five buttons and text fields
        hidden_bid.append(re.search(r"\[(\w+)\] button 'no'", obs.text).group(1))  # type: ignore[union-attr]
        await session.close()

    await find_button_bid()
    with ScriptedChatServer(script) as llm:
        chat = ChatClient(EndpointSettings(base_url=llm.base_url, model="scripted"))
        settings = FilterSettings(name="lines+structure", cost_gate=False, json_schema="off")
        config = EpisodeConfig(make_filter=filter_maker(FilterContext(settings, retriever=chat)))
        summary = await run_episode(
            MiniWoBTask(miniwob="click-button", seed=0, max_steps=2),
            resources_of(browser, chat, miniwob_server), tmp_path, config)
        await chat.close()
    [step] = read_steps(tmp_path / "miniwob.click-button.seed0")
    assert f"[{hidden_bid[0]}]" not in step.observation
    assert summary.success is True
    assert step.filter_result.misses == hidden_bid and summary.filter_misses == 1
