"""Code that overrides the model is never counted as the agent's work: an episode whose
actions a hook replaced (``step.replace_action``) is ``hooked``, marked on its steps,
counted in its summary, named in the run's table, the bench report and the viewer, and
left out of the agent's success rate, as a person's help (``assisted``) is."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.apps.bench.plan import EpisodeSpec
from linewise.apps.bench.report import write_report
from linewise.apps.bench.results import RESULTS_FILE, ResultsWriter, result_from_summary
from linewise.apps.viewer.build import write_viewer
from linewise.cli.results_table import print_summary_table
from linewise.records import EpisodeSummary
from linewise.runtime.browser.chromium import Browser, BrowserSession
from linewise.runtime.episode import StepContext, StepHooks
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.runtime.tasks.schema import MiniWoBTask
from linewise.runtime.trace import read_steps
from linewise.settings import EndpointSettings
from linewise.testing import ScriptedChatServer, bid_matching, miniwob_solver
from tests.support.episodes import resources_of, run_episode

SHOTS = Path("/tmp/see-shots")
HOOKED_TASK = MiniWoBTask(miniwob="click-button", seed=3, max_steps=3)
ALONE_TASK = MiniWoBTask(miniwob="click-button", seed=4, max_steps=3)


def guesses_a_bid(messages: list[dict[str, Any]]) -> str:
    return "<think>There must be a button.</think><action>click('9999')</action>"


class ClicksTheGoalsButton(StepHooks):
    """Code in the model's place at the first step: it clicks the button the goal names
    (click-button: 'Click on the "X" button.')."""

    async def before_act(self, step: StepContext) -> None:
        if step.index == 0:
            assert step.observation is not None
            label = step.goal.split('"')[1]
            bid = bid_matching("\n".join(step.observation.lines), f"button '{label}'")
            step.replace_action(f"click('{bid}')")


async def _episodes(browser: Browser, miniwob_server: MiniWoBServer, out: Path
                    ) -> tuple[EpisodeSummary, EpisodeSummary]:
    """A click-button episode whose answers a hook replaced, and one the model solved
    alone, written as a bench writes them (``<out>/none/<task>``)."""
    with ScriptedChatServer(guesses_a_bid) as wrong, ScriptedChatServer(miniwob_solver) as right:
        guessing = ChatClient(EndpointSettings(base_url=wrong.base_url, model=wrong.model))
        solving = ChatClient(EndpointSettings(base_url=right.base_url, model=right.model))
        hooked = await run_episode(HOOKED_TASK, resources_of(browser, guessing, miniwob_server),
                                   out / "none", hooks=[ClicksTheGoalsButton()])
        alone = await run_episode(ALONE_TASK, resources_of(browser, solving, miniwob_server),
                                  out / "none")
    return hooked, alone


@pytest.mark.slow
async def test_an_episode_whose_actions_code_replaced_is_hooked_everywhere(
    browser: Browser, miniwob_server: MiniWoBServer, session: BrowserSession, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = tmp_path / "bench"
    hooked, alone = await _episodes(browser, miniwob_server, bench)
    # the task got done, by the hook's click: not the agent's success
    assert hooked.success is True and hooked.n_steps == 1
    assert hooked.outcome == "hooked" and hooked.agent_success is None
    assert hooked.hook_steps == 1 and hooked.assisted_steps == 0
    assert alone.outcome == "agent" and alone.agent_success is True and alone.hook_steps == 0
    assert hooked.directory is not None and alone.directory is not None
    [step] = read_steps(hooked.directory)
    assert step.hook_replaced and step.operator is None
    assert step.model_action == "click('9999')" and step.action != step.model_action
    assert not any(s.hook_replaced or s.model_action for s in read_steps(alone.directory))
    on_disk = json.loads((hooked.directory / "summary.json").read_text())
    assert on_disk["outcome"] == "hooked" and on_disk["agent_success"] is None
    assert on_disk["hook_steps"] == 1

    # the run's table
    print_summary_table([alone, hooked], bench)
    table = capsys.readouterr().out
    alone_row, hooked_row = table.splitlines()[1:3]
    assert alone_row.split()[1] == "yes"
    assert hooked_row.split()[1:4] == ["hooked", "(task", "done)"]
    assert "a hook replaced 1 of 1 actions: not counted as the agent's" in hooked_row
    assert ("1/1 succeeded: the agent's own work, judged (not counted: 1 with actions "
            "replaced by code)") in table

    # the bench's results lines and report
    with ResultsWriter(bench / RESULTS_FILE) as writer:
        for summary, task in ((hooked, HOOKED_TASK), (alone, ALONE_TASK)):
            assert summary.directory is not None
            spec = EpisodeSpec(task=task, base_task="miniwob.click-button", seed=task.seed,
                               filter="none", benchmark="miniwob")
            writer.append(result_from_summary(spec, summary, read_steps(summary.directory),
                                              backend="local"))
    report, _ = write_report(bench, Prices())
    [group] = report.overall
    assert (group.episodes, group.judged, group.successes, group.hooked) == (2, 1, 1, 1)
    markdown = (bench / "report.md").read_text()
    # 2 episodes, 1 agent outcome (judged: a success), no fault, 0 + 1 not the agent's
    assert re.search(r"\| scripted \| none \| 2 \| 1 \| 100\.0[^|]*\| 0 \| 0 \+ 1 by code \|",
                     markdown), markdown
    SHOTS.mkdir(exist_ok=True)
    page = session.page
    await page.set_viewport_size({"width": 1400, "height": 900})
    await page.goto((bench / "report.html").as_uri())
    overall_table = await page.locator("table").first.inner_text()
    assert "0 + 1 by code" in overall_table
    await page.screenshot(path=str(SHOTS / "hooked-report.png"), full_page=True)

    # the viewer: the index, the episode's badge and its step
    index = write_viewer(bench)
    await page.goto(index.as_uri())
    await page.wait_for_selector("#episodes tbody tr")
    counts = await page.locator("#counts").inner_text()
    assert "1 of 1 judged succeeded on the agent's own" in counts
    assert "not counted: 1 with actions replaced by code" in counts
    row = page.locator("#episodes tbody tr.hooked")
    assert await row.locator("td.outcome").inner_text() == (
        "actions replaced by code (1 step; task done)")
    await page.select_option("#status", "hooked")
    assert await page.locator("#episodes tbody tr").count() == 1
    await page.screenshot(path=str(SHOTS / "hooked-index.png"))
    await row.locator("a").click()
    await page.wait_for_selector("body[data-shown]")
    badge = await page.locator("#outcome").inner_text()
    assert badge.startswith("actions replaced by code (a hook, 1 step) · task done · "
                            "not the agent's result")
    decision = await page.locator("#decision").inner_text()
    assert "a hook replaced the model's action (ran the action above)" in decision
    assert "model proposed\nclick('9999')" in decision
    assert await page.locator("#timeline button.hooked").count() == 1
    await page.screenshot(path=str(SHOTS / "hooked-episode.png"))
