"""The viewer on real replays: a task solved by a scripted model on a local page, then
replayed as recorded, diverged on a renamed button without a model, and healed there by
one (tests/support/replays.py). Pages rendered in headless Chromium."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from playwright.async_api import Page

from linewise.apps.viewer.build import write_viewer
from linewise.apps.viewer.paths import episode_page
from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.trace import read_steps
from tests.support.replays import ReplayEpisodes

pytestmark = pytest.mark.slow  # five runs make the replays shown

ANSWER = "The reminder was sent."


@pytest.fixture(scope="module")
def episodes(replay_episodes: ReplayEpisodes) -> ReplayEpisodes:
    write_viewer(replay_episodes.root)
    return replay_episodes


def _page_of(e: ReplayEpisodes, which: str) -> str:
    summary = getattr(e, which)
    rel = summary.directory.relative_to(e.root).as_posix()
    return (e.root / "view" / episode_page(rel)).as_uri()


async def _open(page: Page, url: str) -> None:
    await page.set_viewport_size({"width": 1400, "height": 900})
    await page.goto(url)
    await page.wait_for_selector("body[data-shown]")


async def _step(page: Page, index: int) -> None:
    await page.goto(page.url.split("#")[0] + f"#step={index}")
    await page.wait_for_selector(f"body[data-shown='{index}']")


async def test_a_healed_replay_marks_each_step_and_says_why_one_was_healed(
    episodes: ReplayEpisodes, session: BrowserSession, tmp_path: Path,
) -> None:
    page = session.page
    await _open(page, _page_of(episodes, "healed"))
    badge = await page.text_content("#outcome") or ""
    assert "healed replay (1 step chosen by the model)" in badge
    assert "task done" in badge and "not the agent's result" in badge
    assert "success" not in badge
    summary = await page.text_content("#replay") or ""
    assert "of 4-step program" in summary and str(episodes.agent.directory) in summary
    assert "3 replayed with no model call · 1 healed by the model · 1 model call in all" \
        in summary
    assert await page.text_content("#answer") == f"answer {ANSWER}"
    classes = await page.locator("#timeline button").evaluate_all(
        "bs => bs.map(b => ['replayed', 'healed'].filter(c => b.classList.contains(c)))")
    assert classes == [["replayed"], ["replayed"], ["healed"], ["replayed"]]

    # a replayed step: the recorded action, and the element its locator found here
    steps = read_steps(episodes.healed.directory)  # type: ignore[arg-type]
    first = steps[0].replay
    assert first is not None and first.mode == "replayed"
    assert await page.text_content("#step-mode") == "replayed"
    panel = await page.inner_text("#replay-step")
    assert "no model was asked" in panel and first.recorded_action in panel
    [(recorded, found)] = first.resolved.items()
    assert f"recorded [{recorded}] → found [{found}]: link 'Invoice 1042'" in panel
    assert "link 'Invoice 1042'" in await page.inner_text("#decision")

    # the healed step: why the recorded one did not fit, and what the model chose
    await _step(page, 2)
    assert await page.text_content("#step-mode") == "healed"
    panel = await page.inner_text("#replay-step")
    assert "the action model chose this step's action" in panel
    assert "none (its element was found nowhere on the page)" in panel
    assert "Send reminder" in panel  # the detail: what was looked for
    assert "program step\n3 of 4" in panel
    decision = await page.inner_text("#decision")
    assert "button 'Send notice'" in decision
    await page.screenshot(path=str(tmp_path / "healed-step.png"))


async def test_a_diverged_replay_says_where_and_why_it_stopped(
    episodes: ReplayEpisodes, session: BrowserSession, tmp_path: Path,
) -> None:
    page = session.page
    await _open(page, _page_of(episodes, "diverged"))
    badge = await page.text_content("#outcome") or ""
    assert "replayed a recorded program, no model call · diverged" in badge
    assert "not the agent's result" in badge
    summary = await page.text_content("#replay") or ""
    assert ("diverged at program step 3 of 4: none (its element was found nowhere on "
            "the page)") in summary
    assert "Send reminder" in summary
    assert not await page.is_visible("#answer")  # it never answered
    await page.screenshot(path=str(tmp_path / "diverged.png"))


async def test_a_replay_the_model_took_over_says_so(
    episodes: ReplayEpisodes, session: BrowserSession, tmp_path: Path,
) -> None:
    """The replay cache hands an episode to the model when healing fails."""
    assert episodes.healed.directory is not None
    episode = tmp_path / "took-over"
    shutil.copytree(episodes.healed.directory, episode)
    summary = json.loads((episode / "summary.json").read_text())
    summary["replay"].update(fell_back_at=2, detail="several: 2 elements")
    (episode / "summary.json").write_text(json.dumps(summary))
    page = session.page
    await _open(page, write_viewer(episode).as_uri())
    assert "then it took over" in (await page.text_content("#outcome") or "")
    assert ("healing failed at program step 3 of 4: the model took over as an agent"
            in (await page.text_content("#replay") or ""))


async def test_the_index_lists_replays_apart_from_the_agents_outcomes(
    episodes: ReplayEpisodes, session: BrowserSession, tmp_path: Path,
) -> None:
    page = session.page
    await page.set_viewport_size({"width": 1400, "height": 700})
    await page.goto((episodes.root / "view" / "index.html").as_uri())
    await page.wait_for_selector("#episodes tbody tr")
    outcomes = dict(zip(
        [t.split("/")[0] for t in await page.locator("#episodes tbody tr a").evaluate_all(
            "as => as.map(a => a.getAttribute('href').split('episodes/')[1])")],
        await page.locator("#episodes td.outcome").all_text_contents(), strict=True))
    assert outcomes["agent__remind.html"] == "success"
    assert outcomes["replayed__remind.html"] == "replayed, no model (task done)"
    assert outcomes["diverged__remind.html"] == "replayed, no model (diverged)"
    assert outcomes["healed__remind.html"] == "healed replay, 1 model call (task done)"
    counts = await page.text_content("#counts") or ""
    assert "1 of 1 judged succeeded on the agent's own" in counts
    assert "not counted: 4 replays: 2 of 3 replayed succeeded, 1 of 1 healed succeeded" \
        in counts
    answers = await page.locator("#episodes td.answer").all_text_contents()
    assert answers.count(ANSWER) == 4 and answers.count("") == 1  # the diverged one
    await page.screenshot(path=str(tmp_path / "index.png"))
    await page.select_option("#status", "healed")
    assert await page.locator("#episodes tbody tr").count() == 1
    await page.select_option("#status", "success")  # the agent's successes only
    assert await page.locator("#episodes tbody tr").count() == 1
