"""A person's work is never counted as the agent's: an episode a person steered at the
step-through prompt is ``assisted`` in its summary, its results line, the run's table
and the report; a guessed bid is not the filter's miss; step errors are counted."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from linewise.agent.filters.truncate import TruncateFilter
from linewise.cli.results_table import print_summary_table
from linewise.records import EpisodeSummary
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.debug.stepper import Choice, PendingStep, StepThroughHooks
from linewise.runtime.episode import EpisodeConfig
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.runtime.tasks.schema import MiniWoBTask
from linewise.runtime.trace import read_steps
from linewise.settings import EndpointSettings
from linewise.testing import ScriptedChatServer, miniwob_solver
from tests.support.episodes import resources_of, run_episode


class RunsTheModelsActionAsAnOverride:
    """A person who, at the first step, types in the very action the model proposed:
    still a person's decision, so the episode is no longer the agent's alone."""

    def waiting(self, index: int) -> None:
        pass

    async def choose(self, pending: PendingStep) -> Choice:
        if pending.index == 0:
            return Choice("override", pending.action)
        return Choice("run")

    async def hand_back(self, pending: PendingStep) -> None:
        raise AssertionError("not asked to work by hand")


def guesses_a_bid(messages: list[dict[str, Any]]) -> str:
    return "<think>There must be a button.</think><action>click('9999')</action>"


@pytest.mark.slow
async def test_an_overridden_episode_is_assisted_never_the_agents_success(
    browser: Browser, miniwob_server: MiniWoBServer, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    task = MiniWoBTask(miniwob="click-button", seed=3, max_steps=3)
    with ScriptedChatServer(miniwob_solver) as llm:
        client = ChatClient(EndpointSettings(base_url=llm.base_url, model=llm.model))
        env = resources_of(browser, client, miniwob_server)
        stepper = StepThroughHooks(RunsTheModelsActionAsAnOverride())
        assisted = await run_episode(task, env, tmp_path / "assisted", hooks=[stepper])
        alone = await run_episode(task, env, tmp_path / "alone")
    assert assisted.success is True and alone.success is True  # the task got done twice
    assert assisted.assisted_steps == 1 and assisted.outcome == "assisted"
    assert assisted.agent_success is None
    assert alone.outcome == "agent" and alone.agent_success is True
    on_disk = json.loads((tmp_path / "assisted" / task.id / "summary.json").read_text())
    assert on_disk["outcome"] == "assisted" and on_disk["agent_success"] is None

    stopped = EpisodeSummary(episode_id="q", task_id="miniwob.quit", status="stopped",
                             termination="user_stopped", n_steps=1,
                             error="the operator stopped the episode")
    print_summary_table([alone, assisted, stopped], tmp_path, ["miniwob.never-ran"])
    table = capsys.readouterr().out
    alone_row, assisted_row, stopped_row, never_row = table.splitlines()[1:5]
    assert alone_row.split()[:3] == [task.id, "yes", "1.00"]  # the agent's own run
    assert assisted_row.split()[:4] == [task.id, "assisted", "(task", "done)"]
    assert stopped_row.split()[:2] == ["miniwob.quit", "stopped"]
    assert never_row.split()[:3] == ["miniwob.never-ran", "not", "run"]
    assert ("1/1 succeeded: the agent's own work, judged (not counted: 1 assisted by "
            "a person, 1 stopped, 1 not run)") in table


def test_the_results_table_never_counts_a_stopped_or_assisted_success(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def summary(task: str, **fields: Any) -> EpisodeSummary:
        return EpisodeSummary(episode_id=task, task_id=task, status="finished",
                              started_at=datetime.now(UTC), **fields)

    summaries = [
        summary("a", termination="task_done", success=True, n_steps=2),
        summary("b", termination="task_done", success=True, n_steps=3, assisted_steps=2),
        summary("c", termination="max_steps", success=False, n_steps=5),
    ]
    print_summary_table(summaries, tmp_path)
    out = capsys.readouterr().out
    assert "1/2 succeeded" in out and "1 assisted by a person" in out
    assert "a person decided 2 of 3 steps" in out


@pytest.mark.slow
async def test_a_guessed_bid_is_not_a_filter_miss_and_its_errors_are_counted(
    browser: Browser, miniwob_server: MiniWoBServer, tmp_path: Path
) -> None:
    task = MiniWoBTask(miniwob="click-button", seed=3, max_steps=2)
    with ScriptedChatServer(guesses_a_bid) as llm:
        client = ChatClient(EndpointSettings(base_url=llm.base_url, model=llm.model))
        env = resources_of(browser, client, miniwob_server)
        # A filter that drops lines: the guess is what it did not hide, all the same.
        config = EpisodeConfig(make_filter=lambda: TruncateFilter(max_tokens=40))
        summary = await run_episode(task, env, tmp_path, config)
    steps = read_steps(tmp_path / task.id)
    assert all(s.filter_result.kept_lines < s.axtree_lines for s in steps)
    assert [s.absent_bids for s in steps] == [["9999"], ["9999"]]
    assert all(s.filter_result.misses == [] for s in steps)
    assert summary.filter_misses == 0
    assert summary.action_errors == 2 and summary.parse_errors == 0
