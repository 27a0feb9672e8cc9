"""Every action prompt fits the model's context, whatever the page's size; an endpoint
that still refuses one for its length is a configuration error naming the fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from linewise.agent.filters.base import FilterInput
from linewise.agent.prompt_fit import PromptLimits, fit_view
from linewise.errors import ContextOverflow
from linewise.records import outcome_of
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.run import run_tasks
from linewise.runtime.tasks.loader import adhoc_task
from linewise.runtime.trace import read_steps
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import ScriptedChatServer, StaticServer
from linewise.tokens import count_tokens

WORDS = ["the", "option", "rewrites", "history", "when", "a", "file", "was", "renamed",
         "following", "its", "content", "across", "commits", "showing", "each", "change"]


def write_manual(folder: Path, sections: int = 420) -> Path:
    """A documentation page of about 60k tokens of AXTree: sections of prose and options."""
    parts = ["<html><head><title>Manual</title></head><body><h1>Manual</h1>"]
    for n in range(sections):
        prose = " ".join(f"{WORDS[(n * 7 + i) % len(WORDS)]}{n % 13}" for i in range(90))
        parts.append(f"<h2 id='s{n}'>Section {n}</h2><p>{prose}</p>"
                     f"<dl><dt><a href='#s{n}'>--option-{n}</a></dt><dd>Sets value {n}.</dd></dl>")
    parts.append("</body></html>")
    path = folder / "manual.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def answer_script(messages: list[dict[str, Any]]) -> str:
    return "<think>The page says it.</think><action>send_msg_to_user('done')</action>"


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LinewiseSettings:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "LINEWISE_")):
            monkeypatch.delenv(name)
    return LinewiseSettings(local={"gguf": tmp_path / "absent.gguf"}, screenshots=False)


@pytest.fixture(scope="module")
def manual(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("manual")
    write_manual(folder)
    with StaticServer(folder) as server:
        yield server


async def run_once(manual: StaticServer, settings: LinewiseSettings, out: Path, *,
                   server_context: int, client_context: int) -> tuple[Any, ScriptedChatServer]:
    task = adhoc_task(manual.url("manual.html"), "What does --option-7 set? Answer the user.", 2)
    with ScriptedChatServer(answer_script, context_tokens=server_context) as llm:
        model = ChatClient(EndpointSettings(base_url=llm.base_url, model="scripted",
                                            context_tokens=client_context))
        try:
            [summary] = await run_tasks([task], settings, out, action_model=model,
                                        filter="none")
        finally:
            await model.close()
    return summary, llm


@pytest.mark.slow
async def test_a_60k_token_page_never_makes_an_oversized_request(
    manual: StaticServer, settings: LinewiseSettings, tmp_path: Path
) -> None:
    summary, llm = await run_once(manual, settings, tmp_path / "run",
                                  server_context=32768, client_context=32768)
    [step] = read_steps(tmp_path / "run" / summary.task_id)
    assert step.obs_tokens_full > 55_000, "the page must be far over the context"
    assert llm.refused_for_context == [] and len(llm.requests) == 1
    assert summary.termination == "agent_done" and summary.answer == "done"
    fit = step.filter_result.notes["context_fit"]
    assert isinstance(fit, dict) and fit["view_lines_cut"] > 0
    assert "not shown: the page is larger than the model's context" in step.observation
    assert step.obs_tokens_shown <= fit["room_tokens"] < 32768
    # what the trace says the model saw is what it was sent
    assert step.observation in llm.requests[0]["messages"][1]["content"]
    assert step.filter_result.kept_lines < step.axtree_lines


@pytest.mark.slow
async def test_an_endpoint_smaller_than_configured_is_a_configuration_error(
    manual: StaticServer, settings: LinewiseSettings, tmp_path: Path
) -> None:
    summary, llm = await run_once(manual, settings, tmp_path / "run",
                                  server_context=16384, client_context=32768)
    assert llm.refused_for_context, "the endpoint must have refused the prompt"
    assert summary.infra_kind == "config"
    assert outcome_of(summary.termination, summary.infra_kind) == "infrastructure"
    assert summary.error is not None
    assert "32768" in summary.error and "--context-tokens" in summary.error
    assert "exceeds the available context size" in summary.error


async def test_the_client_names_the_context_it_assumed() -> None:
    with ScriptedChatServer(answer_script, context_tokens=2048) as llm:
        model = ChatClient(EndpointSettings(base_url=llm.base_url, model="scripted"))
        try:
            with pytest.raises(ContextOverflow) as raised:
                await model.complete([{"role": "user", "content": "word " * 5000}])
        finally:
            await model.close()
    assert raised.value.infra_kind == "config" and "32768" in str(raised.value)
    assert len(llm.requests) == 1, "a context error is never retried"


def test_fit_view_cuts_at_the_bottom_with_a_marker() -> None:
    lines = [f"\t[{n}] link 'entry number {n} of the long index'" for n in range(1, 401)]
    observation = FilterInput(goal="g", lines=["RootWebArea 'Index'", *lines])
    whole = observation.keep("none", range(1, 402))
    fitted = fit_view(observation, whole, room=1000)
    assert fitted.tokens_shown <= 1000 == fitted.notes["context_fit"]["room_tokens"]
    shown = fitted.text.split("\n")
    assert shown[-1].startswith("... (") and "not shown" in shown[-1]
    assert fitted.kept_lines == list(range(1, len(shown)))
    assert fitted.shown_bids == [str(n) for n in range(1, len(shown) - 1)]
    assert count_tokens(fitted.text) == fitted.tokens_shown
    assert fit_view(observation, whole, room=whole.tokens_shown) is whole


def test_room_leaves_the_answer_a_reask_and_the_tokenizer_margin() -> None:
    limits = PromptLimits(context_tokens=32768, answer_tokens=768)
    room = limits.view_room(1500)
    assert room + 1500 < (32768 - 2 * 768) / 1.1
    assert PromptLimits(context_tokens=2048, answer_tokens=768).view_room(1500) == 200
