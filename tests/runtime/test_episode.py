"""Whole episodes through the real loop: real Chromium, a scripted model behind real HTTP."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
import structlog.contextvars
import structlog.testing

from linewise.agent.filters.truncate import NoFilter, TruncateFilter
from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.episode import EpisodeConfig
from linewise.runtime.log import configure_logging
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.runtime.tasks.schema import MiniWoBTask, WebTask
from linewise.runtime.trace import read_steps, read_summary
from linewise.settings import AgentSettings, EndpointSettings
from linewise.testing import (
    FunctionModel,
    ScriptedChatServer,
    StaticServer,
    bid_matching,
    miniwob_solver,
    prompt_section,
)
from tests.support.episodes import resources_of, run_episode


def _client(server: ScriptedChatServer) -> ChatClient:
    return ChatClient(EndpointSettings(base_url=server.base_url, model=server.model))


def _check_trace(directory: Path, summary: EpisodeSummary) -> list[StepRecord]:
    on_disk = read_summary(directory)
    assert on_disk.model_dump() == summary.model_dump()
    steps = read_steps(directory)
    assert len(steps) == summary.n_steps >= 1
    raw = [json.loads(line) for line in (directory / "steps.jsonl").read_text().splitlines()]
    for index, (step, line) in enumerate(zip(steps, raw, strict=True)):
        for key in ("index", "url", "axtree", "observation", "llm_calls", "think", "action",
                    "action_error", "reward", "timings", "screenshot"):
            assert key in line, key
        assert step.index == index
        assert step.axtree.startswith("1|RootWebArea")
        assert step.observation and step.obs_tokens_full > 0
        call = step.llm_calls[0]
        assert call.messages[0]["role"] == "system" and call.response
        assert call.prompt_tokens > 0 and call.completion_tokens > 0 and call.latency_ms > 0
        assert step.screenshot and (directory / step.screenshot).read_bytes()[:4] == b"\x89PNG"
    return steps


@pytest.mark.slow
async def test_scripted_model_solves_two_miniwob_tasks(
    browser: Browser, miniwob_server: MiniWoBServer, tmp_path: Path
) -> None:
    with ScriptedChatServer(miniwob_solver) as llm:
        env = resources_of(browser, _client(llm), miniwob_server)
        for name, seed, n_steps in (("click-button", 3, 1), ("enter-text", 1, 2)):
            task = MiniWoBTask(miniwob=name, seed=seed, max_steps=5)
            summary = await run_episode(task, env, tmp_path)
            assert summary.success is True and summary.reward == 1.0, summary
            assert summary.termination == "task_done" and summary.n_steps == n_steps
            assert summary.tokens.action_prompt > 0 and summary.time.wall_s > 0
            steps = _check_trace(tmp_path / task.id, summary)
            assert steps[-1].reward == 1.0 and steps[-1].done
        assert len(llm.requests) == 3
    system = llm.requests[0]["messages"][0]["content"]
    assert "click(" in system and "goto(" not in system and "tab_focus(" not in system


def looping_typist(messages: list[dict[str, Any]]) -> str:
    """Fills the field again and again, as small models do, until told that it is futile."""
    prompt = messages[1]["content"]
    value = re.search(r'Enter "(.+)" into', prompt_section(prompt, "Goal")).group(1)  # type: ignore[union-attr]
    tree = prompt_section(prompt, "Current page")
    if "nothing on the page changed" in messages[-1]["content"]:
        submit = bid_matching(tree, "button .Submit")
        return f"<think>Submit.</think><action>click('{submit}')</action>"
    box = bid_matching(tree, "textbox")
    return f"<think>Type it.</think><action>fill('{box}', '{value}')</action>"


@pytest.mark.slow
async def test_a_loop_on_an_unchanged_page_is_broken(
    browser: Browser, miniwob_server: MiniWoBServer, tmp_path: Path
) -> None:
    task = MiniWoBTask(miniwob="enter-text", seed=2, max_steps=4)
    outcomes = {}
    with ScriptedChatServer(looping_typist) as llm:
        env = resources_of(browser, _client(llm), miniwob_server)
        for escapes in (2, 0):
            out = tmp_path / f"escapes{escapes}"
            config = EpisodeConfig(agent=AgentSettings(repeat_escapes=escapes))
            summary = await run_episode(task, env, out, config)
            outcomes[escapes] = (summary, read_steps(out / task.id))
        temperatures = [request["temperature"] for request in llm.requests]
    summary, steps = outcomes[2]
    # the second fill still changed the page (the field gained focus and value); the
    # third would not have, so the model was told and chose to submit
    assert summary.success is True and summary.n_steps == 3
    assert (summary.repeats_escaped, summary.repeats_kept) == (1, 0)
    assert [s.repeat_escape for s in steps] == [None, None, "escaped"]
    assert [len(s.llm_calls) for s in steps] == [1, 1, 2]
    assert steps[2].action and steps[2].action.startswith("click(")
    assert steps[1].axtree == steps[2].axtree
    summary, steps = outcomes[0]
    assert summary.success is False and summary.termination == "max_steps"
    assert [s.action for s in steps] == [steps[0].action] * 4
    assert temperatures == [0.0, 0.0, 0.0, 0.7] + [0.0] * 4


@pytest.mark.slow
async def test_malformed_answers_are_retried_then_fed_back(
    browser: Browser, pages: StaticServer, tmp_path: Path
) -> None:
    answers = iter([
        "I think I should click something.",           # no action block: retried
        "<action>click(bid)</action>",                  # not a literal: retried
        "<action>os.system('rm -rf /')</action>",       # not an action: retries exhausted
        "<think>Try an unknown id.</think><action>click('4242')</action>",
        "<think>Done.</think><action>send_msg_to_user('all done')</action>",
    ])
    with ScriptedChatServer(lambda _messages: next(answers)) as llm:
        env = resources_of(browser, _client(llm), None)
        task = WebTask(id="form", url=pages.url("form.html"), goal="Say done.", max_steps=5)
        configure_logging(json_lines=False, level="INFO")  # step lines are info
        try:
            with structlog.testing.capture_logs() as logs:
                summary = await run_episode(task, env, tmp_path,
                                            EpisodeConfig(agent=AgentSettings(parse_retries=2)))
        finally:
            configure_logging(json_lines=False, level="WARNING")
        steps = read_steps(tmp_path / "form")
    assert [len(s.llm_calls) for s in steps] == [3, 1, 1]
    # the log line of a step whose answer never parsed says so: nothing was executed
    step_logs = [e for e in logs if e["event"] == "step"]
    assert [e["executed"] for e in step_logs] == [False, True, True]
    assert step_logs[0]["error"] == steps[0].parse_error
    assert steps[0].action is None and "Only the listed action" in (steps[0].parse_error or "")
    retry_prompt = steps[0].llm_calls[1].messages[-1]["content"]
    assert "no <action>" in retry_prompt
    assert steps[1].last_action_error == steps[0].parse_error
    assert "4242" in (steps[1].action_error or "")
    assert steps[2].last_action_error == steps[1].action_error
    assert summary.termination == "agent_done" and summary.answer == "all done"
    assert summary.success is None


@pytest.mark.slow
async def test_unreachable_url_is_recorded_and_run_goes_on(
    browser: Browser, miniwob_server: MiniWoBServer, tmp_path: Path
) -> None:
    with ScriptedChatServer(miniwob_solver) as llm:
        env = resources_of(browser, _client(llm), miniwob_server)
        dead = WebTask(id="dead", url="http://127.0.0.1:9/nothing", goal="x", max_steps=2)
        summary = await run_episode(dead, env, tmp_path)
        assert summary.status == "failed" and summary.termination == "error"
        assert "127.0.0.1:9" in (summary.error or "") and summary.traceback
        assert read_summary(tmp_path / "dead").error == summary.error
        after = await run_episode(MiniWoBTask(miniwob="click-test", seed=0), env, tmp_path)
        assert after.success is True


@pytest.mark.slow
async def test_success_check_on_a_web_task(
    browser: Browser, pages: StaticServer, tmp_path: Path
) -> None:
    def script(messages: list[dict[str, Any]]) -> str:
        tree = prompt_section(messages[1]["content"], "Current page")
        if "Page two" in tree:
            return "<action>send_msg_to_user('I am on page two')</action>"
        return f"<action>click('{bid_matching(tree, 'link .Go to page two')}')</action>"

    with ScriptedChatServer(script) as llm:
        env = resources_of(browser, _client(llm), None)
        task = WebTask.model_validate({
            "id": "nav", "url": pages.url("form.html"), "goal": "Go to page two.",
            "max_steps": 4, "success": {"url_contains": "page2", "answer_contains": "page two"},
        })
        summary = await run_episode(task, env, tmp_path)
    assert summary.success is True and summary.n_steps == 2


@pytest.mark.slow
async def test_log_lines_name_the_task_and_the_filter(
    browser: Browser, pages: StaticServer, tmp_path: Path
) -> None:
    """Two episodes of one task under two filters, at once: every line says which."""
    task = WebTask(id="form", url=pages.url("form.html"), goal="Wait", max_steps=2)
    capture = structlog.testing.LogCapture()
    configure_logging(json_lines=False, level="INFO")  # step lines are info
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, capture])
    try:
        await asyncio.gather(*(
            run_episode(task, resources_of(browser, FunctionModel.answering(
                ["<action>noop(10)</action>", "<action>noop(20)</action>"])), tmp_path / name,
                EpisodeConfig(make_filter=make))
            for name, make in (("none", NoFilter), ("truncate", lambda: TruncateFilter(9)))
        ))
    finally:
        configure_logging(json_lines=False, level="WARNING")
    lines = [entry for entry in capture.entries if entry.get("task_id") == "form"]
    steps = [entry for entry in lines if entry["event"] == "step"]
    assert sorted(entry["filter"] for entry in steps) == ["none", "none", "truncate", "truncate"]
    assert {entry["event"] for entry in lines} >= {"episode started", "step"}
    assert all(entry["filter"] in ("none", "truncate") for entry in lines)


@pytest.mark.slow
async def test_a_click_inside_a_reference_entry_is_shown_the_link_that_opens_it(
    browser: Browser, pages: StaticServer, tmp_path: Path
) -> None:
    # asked to open an entry, the 1.5B model clicked the entry's description, which answers
    # no click; the page's only visible link to the entry's anchor is far below it
    def script(messages: list[dict[str, Any]]) -> str:
        prompt = messages[1]["content"]
        if "result: the page went to its part #socket.create_connection" in prompt:
            return "<action>send_msg_to_user('Opened socket.create_connection.')</action>"
        told = messages[-1]["content"].partition("open the entry it lies in:\n")[2]
        if told:
            return f"<action>click('{bid_matching(told, 'create_connection')}')</action>"
        tree = prompt_section(prompt, "Current page")
        below = tree.partition("term 'socket.create_connection")[2]
        return f"<action>click('{bid_matching(below, 'paragraph')}')</action>"

    with ScriptedChatServer(script) as llm:
        env = resources_of(browser, _client(llm), None)
        task = WebTask.model_validate({
            "id": "entry", "url": pages.url("reference.html"), "max_steps": 4,
            "goal": "Which helper connects to a TCP service? Open its entry.",
            "success": {"url_contains": "#socket.create_connection"},
        })
        summary = await run_episode(task, env, tmp_path)
    steps = read_steps(tmp_path / "entry")
    assert summary.success is True and summary.n_steps == 3, [s.action for s in steps]
    link = bid_matching(steps[0].observation, r"link 'create_connection\(\)'")
    assert steps[1].action == f"click('{link}')"
    assert steps[2].url.endswith("reference.html#socket.create_connection")


@pytest.mark.slow
async def test_the_history_says_how_the_element_an_action_named_changed(
    browser: Browser, miniwob_server: MiniWoBServer, tmp_path: Path
) -> None:
    # the view showed the box checked, and the 1.5B model clicked it again six steps
    # running; this script submits only once the history says what its click did
    def script(messages: list[dict[str, Any]]) -> str:
        prompt = messages[1]["content"]
        tree = prompt_section(prompt, "Current page")
        choice = re.search(r"Select (\S+) and", prompt_section(prompt, "Goal")).group(1)  # type: ignore[union-attr]
        radio = bid_matching(tree, rf"radio '{re.escape(choice)}'")
        if f"result: [{radio}] radio '{choice}' is now checked='true'" in prompt:
            return f"<action>click('{bid_matching(tree, 'button .Submit')}')</action>"
        return f"<action>click('{radio}')</action>"

    with ScriptedChatServer(script) as llm:
        env = resources_of(browser, _client(llm), miniwob_server)
        task = MiniWoBTask(miniwob="click-option", seed=4, max_steps=3)
        summary = await run_episode(task, env, tmp_path)
    assert summary.success is True and summary.n_steps == 2
