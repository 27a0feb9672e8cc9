"""The trace viewer and ``--playwright-trace``, on a real bench of MiniWoB++ episodes.

One ``linewise bench`` run (a scripted model behind real HTTP, the truncate filter with a
tiny budget so lines are dropped, Playwright tracing on) feeds every test; the viewer's
pages are rendered in real headless Chromium.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page

from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.trace import read_steps
from linewise.runtime.viewer.build import write_viewer
from linewise.runtime.viewer.discover import find_episodes, folder_kind
from linewise.runtime.viewer.serve import serve_viewer
from linewise.testing import ScriptedChatServer, miniwob_solver, prompt_section

TASKS_YAML = """\
defaults:
  max_steps: 3
tasks:
  - miniwob: enter-text
    seed: 0
"""
TWO_STEPS = "truncate/miniwob.enter-text.seed0"


def solver_past_hidden_submit(messages: list[dict[str, Any]]) -> str:
    """``miniwob_solver``, except that when the filter hid the Submit button it clicks
    the element after the field it filled (enter-text's page order): a filter miss."""
    try:
        return miniwob_solver(messages)
    except ValueError:
        history = prompt_section(messages[1]["content"], "History of your previous steps")
        filled = re.search(r"fill\('(\d+)'", history)
        assert filled is not None, "only the Submit step may lack its element"
        return f"<think>Submit is hidden.</think><action>click('{int(filled[1]) + 1}')</action>"


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("viewer")
    (root / "tasks.yaml").write_text(TASKS_YAML)
    out = root / "bench"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    with ScriptedChatServer(solver_past_hidden_submit) as llm:
        result = subprocess.run(
            [sys.executable, "-m", "linewise.cli.main", "bench", str(root / "tasks.yaml"),
             "--filter", "none", "--filter", "truncate", "--max-obs-tokens", "40",
             "--concurrency", "2", "--out", str(out), "--base-url", llm.base_url,
             "--model", "scripted", "--playwright-trace", "--log-json"],
            env=env, capture_output=True, text=True, timeout=300,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    yield out


async def _open(page: Page, url: str) -> None:
    await page.set_viewport_size({"width": 1400, "height": 900})
    await page.goto(url)
    await page.wait_for_selector("body[data-shown]")


async def _shown(page: Page, index: int) -> None:
    await page.wait_for_selector(f"body[data-shown='{index}']")


def test_the_bench_dropped_lines_and_recorded_boxes(bench_dir: Path) -> None:
    steps = read_steps(bench_dir / TWO_STEPS)
    assert len(steps) == 2
    for step in steps:
        result = step.filter_result
        assert result.kept_ranges and result.kept_lines < result.total_lines
        assert sum(b - a + 1 for a, b in result.kept_ranges) == result.kept_lines
        box = step.target_box
        assert box is not None and box.width > 0 and box.height > 0


async def test_episode_page_steps_through_the_episode(
    bench_dir: Path, session: BrowserSession, tmp_path: Path
) -> None:
    episode = tmp_path / "episode"
    shutil.copytree(bench_dir / TWO_STEPS, episode)
    assert folder_kind(episode) == "episode"
    index = write_viewer(episode)
    assert index == episode / "view" / "index.html"
    page = session.page
    await _open(page, index.as_uri())
    assert await page.text_content("#step-label") == "step 1 / 2"
    assert await page.locator("#timeline button").count() == 2
    assert await page.locator("#tree .ln.kept").count() > 0
    assert await page.locator("#tree .ln.dropped").count() > 0
    assert await page.locator("#tree .ln.target").count() == 1
    box = await page.locator("#target-box").bounding_box()
    shot = await page.locator("#shot-img").bounding_box()
    assert box is not None and shot is not None and box["width"] > 2 and box["height"] > 2
    assert shot["x"] <= box["x"] and box["y"] + box["height"] <= shot["y"] + shot["height"]
    assert "fill(" in (await page.text_content("#decision") or "")
    await page.screenshot(path=str(tmp_path / "episode-step1.png"))

    await page.keyboard.press("ArrowRight")
    await _shown(page, 1)
    assert await page.text_content("#step-label") == "step 2 / 2"
    assert "click(" in (await page.text_content("#decision") or "")
    # The filter hid the Submit button the model clicked: a miss, on a dropped line.
    assert await page.locator("#tree .ln.dropped.miss.target").count() == 1
    assert "17" in (await page.text_content("#filter") or "")
    await page.screenshot(path=str(tmp_path / "episode-step2.png"))
    await page.keyboard.press("ArrowRight")  # past the end: stays on the last step
    await _shown(page, 1)
    await page.click("[data-mode=diff]")
    await page.wait_for_selector("#tree .row.add, #tree .row.del, #tree .row.gap")
    await page.keyboard.press("ArrowLeft")
    await _shown(page, 0)
    assert await page.text_content("#step-label") == "step 1 / 2"
    await page.click("#calls details.call summary")
    # the call's messages are built when it is opened
    await page.wait_for_function(
        "document.querySelector('#calls').textContent.includes('Goal')", timeout=5000
    )


async def test_index_and_report_links_resolve(
    bench_dir: Path, session: BrowserSession, tmp_path: Path
) -> None:
    report = (bench_dir / "report.html").read_text()
    links = re.findall(r'href="([^"#?]+)"', report)
    episode_links = [link for link in links if "/episodes/" in link]
    assert len(episode_links) == 2  # every episode of the bench, from its task row
    for link in links:
        assert (bench_dir / link).is_file(), link

    page = session.page
    await page.set_viewport_size({"width": 1400, "height": 900})
    await page.goto((bench_dir / "report.html").as_uri())
    await page.click(f"a[href='view/episodes/{TWO_STEPS.replace('/', '__')}.html']")
    await page.wait_for_selector("body[data-shown='0']")
    assert await page.text_content("#step-label") == "step 1 / 2"

    await page.goto((bench_dir / "view" / "index.html").as_uri())
    await page.wait_for_selector("#episodes tbody tr")
    assert await page.locator("#episodes tbody tr").count() == 2
    await page.click("th[data-sort=filter]")
    await page.click("th[data-sort=filter]")  # descending: truncate first
    first = page.locator("#episodes tbody tr").first
    assert "truncate" in (await first.text_content() or "")
    await page.select_option("#filter-name", "none")
    assert await page.locator("#episodes tbody tr").count() == 1
    await page.select_option("#filter-name", "truncate")
    await page.screenshot(path=str(tmp_path / "index.png"))
    await first.locator("a").click()
    await page.wait_for_selector("body[data-shown='0']")


def test_playwright_trace_holds_one_chunk_per_step_titled_with_its_action(
    bench_dir: Path,
) -> None:
    folders = find_episodes(bench_dir)
    assert len(folders) == 2
    for folder in folders:
        steps = read_steps(folder.path)
        chunks = sorted((folder.path / "playwright-trace").glob("step-*.zip"))
        assert [c.name for c in chunks] == [f"step-{s.index:03d}.zip" for s in steps]
        for step, chunk in zip(steps, chunks, strict=True):
            assert step.hook_notes["playwright_trace"] == f"playwright-trace/{chunk.name}"
            with zipfile.ZipFile(chunk) as archive:
                first = json.loads(archive.read("trace.trace").splitlines()[0])
                events = [json.loads(line) for line in archive.read("trace.trace").splitlines()]
            assert first["type"] == "context-options"
            assert first["title"] == step.action
            assert any(e.get("type") == "before" for e in events)  # the action's calls


async def test_serve_follows_an_episode_as_its_steps_arrive(
    bench_dir: Path, session: BrowserSession, tmp_path: Path
) -> None:
    episode = tmp_path / "run" / "live"
    shutil.copytree(bench_dir / TWO_STEPS, episode)
    (tmp_path / "run" / "run.json").write_text("{}")
    steps_file = episode / "steps.jsonl"
    first, second = steps_file.read_text().splitlines(keepends=True)
    summary = json.loads((episode / "summary.json").read_text())
    (episode / "summary.json").write_text(json.dumps({**summary, "status": "running"}))
    steps_file.write_text(first + second[: len(second) // 2])  # a step half written
    write_viewer(tmp_path / "run")
    server = serve_viewer(tmp_path / "run")
    try:
        page = session.page
        await _open(page, server.url.replace("index.html", "episodes/live.html"))
        assert await page.text_content("#step-label") == "step 1 / 1"
        assert await page.text_content("#outcome") == "running…"
        with steps_file.open("a") as handle:
            handle.write(second[len(second) // 2:])
        await _shown(page, 1)  # the new step appears and the page follows it
        assert await page.text_content("#step-label") == "step 2 / 2"
        (episode / "summary.json").write_text(json.dumps(summary))
        await page.wait_for_selector("#outcome.ok")
    finally:
        server.close()


async def test_a_persons_decisions_show_in_the_episode_page(
    bench_dir: Path, session: BrowserSession, tmp_path: Path
) -> None:
    """A step a person overrode at the step-through prompt is marked in the timeline and
    shows the model's own proposal beside the action that ran."""
    episode = tmp_path / "episode"
    shutil.copytree(bench_dir / TWO_STEPS, episode)
    steps = read_steps(episode)
    steps[0] = steps[0].model_copy(update={"operator": "overridden",
                                           "model_action": "click('999')"})
    (episode / "steps.jsonl").write_text(
        "".join(step.model_dump_json() + "\n" for step in steps))
    page = session.page
    await _open(page, write_viewer(episode).as_uri())
    decision = await page.text_content("#decision") or ""
    assert "overridden" in decision and "click('999')" in decision
    assert await page.locator("#timeline button.human").count() == 1
    await page.keyboard.press("ArrowRight")
    await _shown(page, 1)
    assert "model proposed" not in (await page.text_content("#decision") or "")
