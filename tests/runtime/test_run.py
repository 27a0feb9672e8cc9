"""``run_tasks`` as a library call: the caller's own models and filter, nothing else opened."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from linewise.agent.filters import registry
from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.agent.filters.registry import FilterContext, FilterRegistration
from linewise.errors import ModelError
from linewise.runtime import filter_choice
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.run import run_tasks
from linewise.runtime.tasks.loader import adhoc_task
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import ScriptedChatServer, StaticServer
from tests.support.cli import page_two_script


class FirstLineAndLinks:
    name = "first-line-and-links"

    def __init__(self) -> None:
        self.steps = 0

    async def apply(self, observation: FilterInput) -> FilterResult:
        self.steps += 1
        kept = [n for n, line in enumerate(observation.lines, 1) if n == 1 or " link " in line]
        text = "\n".join(observation.lines[n - 1] for n in kept)
        return FilterResult(name=self.name, text=text, kept_lines=kept)


@pytest.fixture
def no_endpoints(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LinewiseSettings:
    """Settings with no endpoint and a local model that cannot start: anything opened
    beyond what the caller gave fails the run."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "LINEWISE_")):
            monkeypatch.delenv(name)
    return LinewiseSettings(local={"gguf": tmp_path / "absent.gguf"}, screenshots=False)


@pytest.mark.slow
async def test_run_tasks_uses_the_callers_model_and_filter_object(
    pages: StaticServer, tmp_path: Path, no_endpoints: LinewiseSettings
) -> None:
    task = adhoc_task(pages.url("form.html"), "Open page two", 4)
    shared = FirstLineAndLinks()
    with ScriptedChatServer(page_two_script, model="mine") as llm:
        model = ChatClient(EndpointSettings(base_url=llm.base_url, model="mine"))
        try:
            [summary] = await run_tasks([task], no_endpoints, tmp_path / "run",
                                        action_model=model, filter=shared)
        finally:
            await model.close()
        prompt = llm.requests[0]["messages"][1]["content"]
    assert summary.answer == "page two reached" and summary.filter == "first-line-and-links"
    assert summary.action_model == "mine" and summary.retriever_model == ""
    assert shared.steps == 2 and "button 'Submit'" not in prompt
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["settings"]["action"]["base_url"] is None
    assert manifest["tasks"] == [task.id]  # what it set out to run, for the viewer


@pytest.mark.slow
async def test_run_tasks_opens_the_retriever_only_for_a_filter_that_needs_one(
    pages: StaticServer, tmp_path: Path, no_endpoints: LinewiseSettings
) -> None:
    task = adhoc_task(pages.url("form.html"), "Open page two", 4)
    made: list[FilterContext] = []

    def factory(context: FilterContext) -> Any:
        made.append(context)
        return FirstLineAndLinks()

    with ScriptedChatServer(page_two_script) as llm:
        model = ChatClient(EndpointSettings(base_url=llm.base_url, model="scripted"))
        try:
            [summary] = await run_tasks([task], no_endpoints, tmp_path / "a",
                                        action_model=model, filter=factory)
            assert summary.success is None and summary.answer == "page two reached"
            assert len(made) == 1 and made[0].retriever is None  # one filter per episode
            with pytest.raises(ModelError, match=r"absent\.gguf"):  # lines needs a retriever
                await run_tasks([task], no_endpoints, tmp_path / "b", action_model=model,
                                filter="lines")
            [summary] = await run_tasks([task], no_endpoints, tmp_path / "c",
                                        action_model=model, retriever_model=model,
                                        filter="truncate")
            assert summary.filter == "truncate" and summary.retriever_model == "scripted"
        finally:
            await model.close()


@pytest.mark.slow
async def test_a_run_looks_its_filter_up_once_for_all_its_episodes(
    pages: StaticServer, tmp_path: Path, no_endpoints: LinewiseSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The filter's name is resolved once, at the edge of the run: not again to ask
    whether it needs a retriever, nor to bind it, nor per episode."""
    lookups: list[str] = []

    def counting(name: str) -> FilterRegistration:
        lookups.append(name)
        return registry.get_filter(name)

    monkeypatch.setattr(filter_choice, "get_filter", counting)
    task = adhoc_task(pages.url("form.html"), "Open page two", 4)
    tasks = [task, task]
    with ScriptedChatServer(page_two_script) as llm:
        model = ChatClient(EndpointSettings(base_url=llm.base_url, model="scripted"))
        try:
            summaries = await run_tasks(tasks, no_endpoints, tmp_path / "run",
                                        action_model=model, filter="truncate")
        finally:
            await model.close()
    assert [s.filter for s in summaries] == ["truncate", "truncate"]
    assert [s.answer for s in summaries] == ["page two reached"] * 2
    assert lookups == ["truncate"]
