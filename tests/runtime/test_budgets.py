"""Spending limits: a model that never finishes is stopped, by episode and by run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.records import EpisodeSummary, StepRecord, TokenTotals
from linewise.runtime.budget import Budget, call_cost, totals_cost
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.run import run_tasks
from linewise.runtime.tasks.loader import adhoc_task
from linewise.settings import BudgetSettings, EndpointSettings, FilterSettings, LinewiseSettings
from linewise.testing import ScriptedChatServer, StaticServer
from tests.support.cli import linewise


def never_finishes(messages: list[dict[str, Any]]) -> str:
    return "<think>Keep looking.</think><action>scroll(0, 100)</action>"


async def run_forever(
    pages: StaticServer, out: Path, budget: dict[str, Any], tasks: int = 1
) -> tuple[list[EpisodeSummary], int]:
    # One call per step (no re-asks of the repeated scroll), so token counts add up simply.
    settings = LinewiseSettings(screenshots=False, budget=budget, agent={"repeat_escapes": 0})
    work = [adhoc_task(pages.url("form.html"), "Find the answer", 20) for _ in range(tasks)]
    with ScriptedChatServer(never_finishes) as llm:
        model = ChatClient(EndpointSettings(base_url=llm.base_url, model="scripted"))
        try:
            summaries = await run_tasks(work, settings, out, action_model=model, argv=["t"])
        finally:
            await model.close()
        return summaries, len(llm.requests)


@pytest.mark.slow
async def test_an_episode_stops_cleanly_at_its_cost_limit(
    pages: StaticServer, tmp_path: Path
) -> None:
    [summary], calls = await run_forever(pages, tmp_path / "run", {"max_cost_usd": 0.005})
    assert summary.termination == "budget" and summary.status == "finished"
    assert summary.error is None and "--max-cost" in (summary.budget_stop or "")
    assert 1 <= summary.n_steps < 20 and calls == summary.tokens.llm_calls
    prices = Prices.of(FilterSettings())
    spent = totals_cost(prices, summary.tokens)
    assert spent >= 0.005
    # One step's calls at most beyond the limit: without the last step it was under.
    last = StepRecord.model_validate_json(
        next((tmp_path / "run").glob("*/steps.jsonl")).read_text().splitlines()[-1]
    )
    assert spent - sum(call_cost(prices, c) for c in last.llm_calls) < 0.005
    written = json.loads(next((tmp_path / "run").glob("*/summary.json")).read_text())
    assert written["termination"] == "budget"


@pytest.mark.slow
async def test_a_run_stops_starting_episodes_at_its_token_limit(
    pages: StaticServer, tmp_path: Path
) -> None:
    summaries, _ = await run_forever(
        pages, tmp_path / "run", {"max_tokens": 6000, "max_run_tokens": 9000}, tasks=3
    )
    assert [s.termination for s in summaries] == ["budget", "budget"]
    assert "--max-tokens" in (summaries[0].budget_stop or "")
    assert "--max-run-tokens" in (summaries[1].budget_stop or "")


@pytest.mark.slow
async def test_re_asks_within_one_step_stop_at_the_episode_limit(
    pages: StaticServer, tmp_path: Path
) -> None:
    # An answer that never holds an action, and ten re-asks allowed per step: the limit
    # must hold between the re-asks of a step, not only between steps.
    settings = LinewiseSettings(screenshots=False, budget={"max_tokens": 3000},
                                agent={"parse_retries": 10})
    with ScriptedChatServer(lambda _messages: "I am thinking. " * 50) as llm:
        model = ChatClient(EndpointSettings(base_url=llm.base_url, model="scripted"))
        try:
            [summary] = await run_tasks(
                [adhoc_task(pages.url("form.html"), "Find the answer", 20)], settings,
                tmp_path / "run", action_model=model, argv=["t"])
        finally:
            await model.close()
    assert summary.termination == "budget" and summary.n_steps == 1
    step = StepRecord.model_validate_json(
        next((tmp_path / "run").glob("*/steps.jsonl")).read_text().splitlines()[0])
    assert "--max-tokens 3000" in (step.reasks_stopped or "")
    one_call = step.llm_calls[0].prompt_tokens + step.llm_calls[0].completion_tokens
    # it stopped at the first call that reached the limit, not after eleven
    assert len(step.llm_calls) == -(-3000 // one_call) < 11
    assert summary.tokens.total < 3000 + one_call


def test_budget_reasons_name_the_limit() -> None:
    budget = Budget(BudgetSettings(max_tokens=10, max_run_cost_usd=1.0))
    summary = EpisodeSummary(episode_id="e", task_id="t")
    assert budget.exceeded(summary) is None
    summary.tokens = TokenTotals(action_prompt=11)
    assert "--max-tokens 10" in (budget.exceeded(summary) or "")
    budget.run.add(0, 1.5)
    assert "--max-run-cost $1" in (budget.run_exceeded() or "")


@pytest.mark.slow
def test_a_bench_stops_starting_episodes_when_its_run_budget_is_spent(
    pages: StaticServer, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(json.dumps({"tasks": [
        {"id": f"t{i}", "url": pages.url("form.html"), "goal": "Find it", "max_steps": 20}
        for i in range(3)]}))
    out = tmp_path / "bench"
    with ScriptedChatServer(never_finishes) as llm:
        result = linewise(
            "bench", str(tasks), "--base-url", llm.base_url, "--model", "scripted",
            "--out", str(out), "--concurrency", "1", "--log-json", "--no-screenshots",
            "--max-run-cost", "0.004",
        )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["termination"] == "budget"
    assert lines[0]["error_kind"] is None and lines[0]["n_steps"] < 20
    assert "stopped by the run budget" in result.stdout and "2 episodes not started" \
        in result.stdout
    assert "bench stopped by its run budget" in result.stderr
