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
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page

from linewise.apps.viewer.build import write_viewer
from linewise.apps.viewer.discover import find_episodes, folder_kind
from linewise.apps.viewer.serve import serve_viewer
from linewise.errors import ConfigError
from linewise.records import ManualStep, PageState
from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.trace import read_steps
from linewise.testing import ScriptedChatServer, miniwob_solver, prompt_section
from tests.support.cli import linewise

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


@pytest.mark.slow
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
    # Numbered from 0, as the terminal and the step-NNN files number steps.
    assert await page.text_content("#step-label") == "step 0 (1 of 2)"
    assert await page.locator("#timeline button").all_text_contents() == ["0", "1"]
    assert (await page.get_attribute("#shot-img", "src") or "").endswith("step-000.png")
    assert page.url.endswith("#step=0")
    # The goal is on the page, not only in a tooltip.
    assert "Enter \"Myron\" into the text field" in (await page.text_content("#goal") or "")
    # The tree opens folded: kept lines first, each dropped run one line.
    assert await page.locator("#tree .ln.kept").count() > 0
    assert await page.locator("#tree .row.fold").count() > 0
    assert await page.locator("#tree .ln.dropped").count() == 0
    await page.uncheck("#fold")
    assert await page.locator("#tree .ln.dropped").count() > 0
    # Filter notes read as words, not JSON.
    await page.click("#filter details.notes summary")
    notes = await page.text_content("#filter details.notes") or ""
    assert "max tokens" in notes and "40" in notes and "{" not in notes
    assert await page.locator("#tree .ln.target").count() == 1
    box = await page.locator("#target-box").bounding_box()
    shot = await page.locator("#shot-img").bounding_box()
    assert box is not None and shot is not None and box["width"] > 2 and box["height"] > 2
    assert shot["x"] <= box["x"] and box["y"] + box["height"] <= shot["y"] + shot["height"]
    assert "fill(" in (await page.text_content("#decision") or "")
    await page.screenshot(path=str(tmp_path / "episode-step1.png"))

    await page.keyboard.press("ArrowRight")
    await _shown(page, 1)
    assert await page.text_content("#step-label") == "step 1 (2 of 2)"
    assert "click(" in (await page.text_content("#decision") or "")
    # The filter hid the Submit button the model clicked: a miss, on a dropped line.
    assert await page.locator("#tree .ln.dropped.miss.target").count() == 1
    assert "17" in (await page.text_content("#filter") or "")
    await page.screenshot(path=str(tmp_path / "episode-step2.png"))
    await page.keyboard.press("ArrowRight")  # past the end: stays on the last step
    await _shown(page, 1)
    await page.goto(index.as_uri() + "#step=0")  # an address edited by hand
    await _shown(page, 0)
    await page.goto(index.as_uri() + "#step=1")
    await _shown(page, 1)
    await page.click("[data-mode=diff]")
    await page.wait_for_selector("#tree .row.add, #tree .row.del, #tree .row.gap")
    await page.keyboard.press("ArrowLeft")
    await _shown(page, 0)
    assert await page.text_content("#step-label") == "step 0 (1 of 2)"
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
    assert await page.text_content("#step-label") == "step 0 (1 of 2)"

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


@pytest.mark.slow
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
    # a damaged line, then a step half written
    steps_file.write_text(first + "{garbage\n" + second[: len(second) // 2])
    write_viewer(tmp_path / "run")
    server = serve_viewer(tmp_path / "run")
    try:
        page = session.page
        await _open(page, server.url.replace("index.html", "episodes/live.html"))
        assert await page.text_content("#step-label") == "step 0 (1 of 1)"
        assert await page.text_content("#outcome") == "running…"
        assert "line 2 skipped: not JSON" in (await page.text_content("#problems") or "")
        with steps_file.open("a") as handle:
            handle.write(second[len(second) // 2:])
        await _shown(page, 1)  # the new step appears and the page follows it
        assert await page.text_content("#step-label") == "step 1 (2 of 2)"
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
    assert "ran another action instead of the model's" in decision
    assert "click('999')" in decision
    assert await page.locator("#timeline button.human").count() == 1
    await page.keyboard.press("ArrowRight")
    await _shown(page, 1)
    assert "model proposed" not in (await page.text_content("#decision") or "")


def _rewrite_steps(episode: Path, **updates: dict[str, Any]) -> None:
    """Change recorded steps: ``updates`` maps ``"s<index>"`` to the fields to set."""
    steps = read_steps(episode)
    for name, fields in updates.items():
        index = int(name[1:])
        steps[index] = steps[index].model_copy(update=fields)
    (episode / "steps.jsonl").write_text("".join(s.model_dump_json() + "\n" for s in steps))


async def test_a_take_over_shows_the_page_after_it_and_marks_the_episode_assisted(
    bench_dir: Path, session: BrowserSession, tmp_path: Path
) -> None:
    episode = tmp_path / "episode"
    shutil.copytree(bench_dir / TWO_STEPS, episode)
    shutil.copy(episode / "screenshots" / "step-001.png",
                episode / "screenshots" / "step-000-manual-after.png")
    first = read_steps(episode)[0]
    manual = ManualStep(
        before=PageState(url=first.url, axtree_lines=first.axtree_lines,
                         screenshot="screenshots/step-000.png"),
        after=PageState(url=first.url, axtree_lines=first.axtree_lines,
                        screenshot="screenshots/step-000-manual-after.png"))
    _rewrite_steps(episode, s0={"operator": "manual", "model_action": first.action,
                                "action": None, "manual": manual})
    summary = json.loads((episode / "summary.json").read_text())
    (episode / "summary.json").write_text(json.dumps({**summary, "assisted_steps": 1}))
    page = session.page
    await _open(page, write_viewer(episode).as_uri())
    badge = await page.text_content("#outcome") or ""
    assert "assisted by a person" in badge and "success" not in badge
    assert "worked in the browser by hand" in (await page.text_content("#decision") or "")
    after = page.locator("#manual-after-img")
    assert await page.is_visible("#manual-after")
    assert (await after.get_attribute("src") or "").endswith("step-000-manual-after.png")
    assert await after.evaluate("img => img.complete && img.naturalWidth > 0")
    await page.keyboard.press("ArrowRight")
    await _shown(page, 1)
    assert not await page.is_visible("#manual-after")


async def test_a_guessed_bid_is_not_in_the_tree_not_a_filter_miss(
    bench_dir: Path, session: BrowserSession, tmp_path: Path
) -> None:
    """A trace written before ``absent_bids`` counted a bid in no line of the tree as
    the filter's miss: the viewer tells the two apart from the tree itself."""
    episode = tmp_path / "episode"
    shutil.copytree(bench_dir / TWO_STEPS, episode)
    second = read_steps(episode)[1]
    _rewrite_steps(episode, s1={
        "action": "click('9999')",
        "filter_result": second.filter_result.model_copy(update={"misses": ["9999"]})})
    page = session.page
    await _open(page, write_viewer(episode).as_uri())
    await page.keyboard.press("ArrowRight")
    await _shown(page, 1)
    text = await page.text_content("#filter") or ""
    assert "not in the tree" in text and "9999" in text and "hidden by the filter" not in text
    assert await page.locator("#timeline button.miss").count() == 0


async def test_a_step_of_filter_none_shows_no_stray_null(
    bench_dir: Path, session: BrowserSession, tmp_path: Path
) -> None:
    episode = tmp_path / "episode"
    shutil.copytree(bench_dir / "none/miniwob.enter-text.seed0", episode)
    page = session.page
    await _open(page, write_viewer(episode).as_uri())
    text = await page.inner_text("#filter")
    assert "none" in text and "null" not in text and "undefined" not in text


def _damage(episode: Path) -> None:
    """Between the two steps: a garbage line, a line that is not UTF-8 and one nested
    deeper than any JSON parser recurses."""
    first, second = (episode / "steps.jsonl").read_bytes().splitlines(keepends=True)
    nested = b"[" * 100_000 + b"]" * 100_000 + b"\n"
    (episode / "steps.jsonl").write_bytes(
        first + b"{not json\n" + b"\xff\xfe\x00garbage\n" + nested + second)


@pytest.mark.slow
async def test_damaged_traces_are_shown_with_a_warning_and_the_rest_kept(
    bench_dir: Path, session: BrowserSession, tmp_path: Path
) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(bench_dir, bench, ignore=shutil.ignore_patterns("view", "report.*"))
    damaged = bench / TWO_STEPS
    _damage(damaged)
    (bench / "none/miniwob.enter-text.seed0/summary.json").write_bytes(b"\xff{ not a summary")
    view = linewise("view", str(bench))
    assert view.returncode == 0, view.stderr[-2000:]
    assert "line 2 skipped: not JSON" in view.stderr and "line 3 skipped: not UTF-8" in view.stderr
    assert "line 4 skipped: JSON nested too deeply" in view.stderr
    assert "summary.json is damaged" in view.stderr
    report = linewise("report", str(bench))
    assert report.returncode == 0, report.stderr[-2000:]
    page = session.page
    await _open(page, (bench / "view" / "episodes" / f"{TWO_STEPS.replace('/', '__')}.html")
                .as_uri())
    assert await page.locator("#timeline button").count() == 2  # both steps, around it
    problems = await page.text_content("#problems") or ""
    assert await page.is_visible("#problems") and "line 3 skipped: not UTF-8" in problems
    await page.goto((bench / "view" / "index.html").as_uri())
    await page.wait_for_selector("#episodes tbody tr")
    damaged_rows = page.locator("#episodes tbody tr", has_text="damaged trace")
    assert await damaged_rows.count() == 2  # the bad lines, and the bad summary
    again = linewise("view", str(bench))  # the viewer is up to date: said again all the same
    assert "line 3 skipped: not UTF-8" in again.stderr


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serve_answers_only_under_its_token_and_only_the_viewers_files(
    bench_dir: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(bench_dir, run, ignore=shutil.ignore_patterns("view"))
    (run / "run.json").write_text('{"settings": "private"}')
    write_viewer(run)
    with pytest.raises(ConfigError, match="loopback"):
        serve_viewer(run, host="0.0.0.0")
    server = serve_viewer(run)
    try:
        base = server.url.removesuffix("view/index.html")
        token = base.rstrip("/").rsplit("/", 1)[1]
        assert len(token) >= 24 and server.url.startswith("http://127.0.0.1:")
        origin = base.removesuffix(f"{token}/")
        episode = TWO_STEPS
        assert _get(server.url) == 200
        assert _get(f"{base}view/data/index.js") == 200
        assert _get(f"{base}{episode}/screenshots/step-000.png") == 200
        for leak in ("run.json", "results.jsonl", "bench.json", "report.html",
                     f"{episode}/steps.jsonl", f"{episode}/summary.json",
                     f"{episode}/playwright-trace/step-000.zip",
                     "view/../run.json", "view/%2e%2e/run.json", f"{episode}/", ""):
            assert _get(base + leak) == 404, leak
        for without_token in ("view/index.html", f"{episode}/screenshots/step-000.png",
                              "run.json"):
            assert _get(origin + without_token) == 404, without_token
        assert _get(f"{origin}wrong-token/view/index.html") == 404
    finally:
        server.close()


async def test_the_index_names_tasks_that_never_ran(
    bench_dir: Path, session: BrowserSession, tmp_path: Path
) -> None:
    """A run stopped at the prompt (or by a budget) leaves tasks that never started:
    run.json lists what it set out to run, and the index says which never did."""
    run = tmp_path / "run"
    shutil.copytree(bench_dir / TWO_STEPS, run / "miniwob.enter-text.seed0")
    (run / "run.json").write_text(json.dumps(
        {"tasks": ["miniwob.enter-text.seed0", "miniwob.never-ran"]}))
    page = session.page
    await page.goto(write_viewer(run).as_uri())
    await page.wait_for_selector("#episodes tbody tr")
    rows = await page.locator("#episodes tbody tr").all_inner_texts()
    assert len(rows) == 2 and rows[1].split("\t")[:1] == ["miniwob.never-ran"]
    assert "not run" in rows[1]
    assert "1 not run" in (await page.text_content("#counts") or "")
    await page.select_option("#status", "success")
    assert await page.locator("#episodes tbody tr").count() == 1
