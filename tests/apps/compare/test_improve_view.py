"""``linewise view IMPROVE_DIR``: an improve folder shown as its rounds, each round's
benches leading to their own viewers; ``linewise report IMPROVE_DIR``: its rounds arm by
arm, counted from its benches.

A real ``linewise improve`` (one round and its baseline, MiniWoB++ in Chromium, a
scripted model behind real HTTP that solves click-button only once a worked example is
in its prompt); the page is rendered in headless Chromium and its links followed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from linewise.runtime.browser.chromium import BrowserSession
from linewise.testing import ScriptedChatServer, miniwob_solver
from tests.support.cli import linewise
from tests.support.paths import REPO

TASKS = """\
defaults:
  max_steps: 2
tasks:
  - miniwob: click-test
    seed: 0
  - miniwob: click-button
    seed: 0
"""


def learner(messages: list[dict[str, Any]]) -> str:
    """Solves click-test always, click-button only after seeing a solved one."""
    prompt = messages[1]["content"]
    if "Click on the" in prompt.split("# Goal", 1)[1] and "# Worked examples" not in prompt:
        return "<think>I do not know what to do here.</think><action>noop()</action>"
    return miniwob_solver(messages)


def _table_cells(markdown: str) -> list[list[str]]:
    """improve.md's table rows, cell by cell."""
    return [[cell.strip() for cell in line.strip("|").split("|")]
            for line in markdown.splitlines() if re.match(r"^\| \d", line)]


@pytest.fixture(scope="module")
def improve_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("improve")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    out = tmp_path / "improve"
    with ScriptedChatServer(learner) as llm:
        done = linewise("improve", str(tasks), "--train-seeds", "0-0", "--test-seeds", "1-1",
                        "--rounds", "1", "--out", str(out), "--base-url", llm.base_url,
                        "--model", "scripted", "--no-screenshots", "--filter", "none",
                        "--no-embed", "--no-prune", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.slow
async def test_view_shows_an_improve_folder_as_its_rounds(
    improve_dir: Path, tmp_path: Path, session: BrowserSession,
) -> None:
    """Before: `linewise view IMPROVE_DIR` said it "holds no trace"."""
    out = improve_dir
    done = linewise("view", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"viewer: {(out / 'view' / 'index.html').resolve()}"

    page = session.page
    await page.set_viewport_size({"width": 1400, "height": 900})
    await page.goto((out / "view" / "index.html").as_uri())
    await page.wait_for_selector("#rounds tbody tr")
    await page.screenshot(path=str(tmp_path / "improve-view.png"), full_page=True)
    rounds = await page.eval_on_selector_all(
        "#rounds tbody tr", "trs => trs.map(tr => [...tr.cells].map(td => td.textContent))")
    # the rounds table says what improve.md says
    assert rounds == _table_cells((out / "improve.md").read_text()), rounds
    assert rounds[1][3] == "100.0 ± 0.0 (2/2)"
    labels = await page.eval_on_selector_all(
        "#benches tbody tr", "trs => trs.map(tr => tr.dataset.bench)")
    assert labels == ["round-0/test", "round-1/train", "round-1/test"]
    episodes = await page.eval_on_selector_all(
        "#episodes tbody tr", "trs => trs.map(tr => tr.cells[0].textContent)")
    assert sorted(episodes) == ["round-0/test"] * 2 + ["round-1/test"] * 2 + [
        "round-1/train"] * 2
    for href in await page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)"):
        assert Path(unquote(urlsplit(href).path)).is_file(), href

    # a round's cell leads to that bench's own viewer
    await page.click("#rounds tr[data-round='1'] td[data-bench='round-1/test'] a")
    await page.wait_for_selector("#episodes tbody tr")
    assert page.url == (out / "round-1" / "test" / "view" / "index.html").as_uri()
    outcomes = await page.eval_on_selector_all("#episodes tbody tr", "trs => trs.map(tr => "
                                               "tr.className)")
    assert outcomes == ["success", "success"]


def _calls(bench: Path) -> str:
    """Model calls per judged episode of a bench, from its results lines."""
    lines = [json.loads(line) for line in (bench / "results.jsonl").read_text().splitlines()]
    judged = [r for r in lines if r["outcome"] == "agent" and r["success"] is not None]
    return f"{sum(r['llm_calls'] for r in judged) / len(judged):.1f}"


@pytest.mark.slow
async def test_report_of_an_improve_folder_is_its_rounds_from_its_benches(
    improve_dir: Path, tmp_path: Path, session: BrowserSession,
) -> None:
    """Before: `linewise report IMPROVE_DIR` said "holds no results.jsonl: is it a bench
    folder?" and exited 2."""
    loop_table = (improve_dir / "improve.md").read_text()
    done = linewise("report", str(improve_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(improve_dir / name) for name in (
        "improve.json", "improve.md", "report.md", "report.html", "report.json")]
    # improve.md counted again from the benches says what the loop said
    assert (improve_dir / "improve.md").read_text() == loop_table
    for part in ("round-0/test", "round-1/train", "round-1/test"):
        assert (improve_dir / part / "report.html").is_file(), part  # each bench's own

    data = json.loads((improve_dir / "report.json").read_text())
    arms = [(a["round"], a["part"], a["success"]["successes"], a["success"]["judged"],
             a["ran"], a["planned"]) for a in data["rounds"]]
    assert arms == [(0, "test", 1, 2, 2, 2), (1, "train", 1, 2, 2, 2), (1, "test", 2, 2, 2, 2)]
    assert data["improve"]["test_seeds"] == "1-1" and len(data["benches"]) == 3

    markdown = (improve_dir / "report.md").read_text()
    assert markdown.startswith(f"# Improve loop: {improve_dir.name}\n"), markdown[:200]
    assert "training seeds 0-0, test seeds 1-1; filter none; pruning off." in markdown
    rows = [line for line in markdown.splitlines() if re.match(r"^\| \d \| (train|test)", line)]
    assert rows == [
        f"| 0 | test | – | – | 2 / 2 | 50.0 ± 35.4 (1/2) | 0 | 0 | "
        f"{_calls(improve_dir / 'round-0' / 'test')} |",
        f"| 1 | train | – | – | 2 / 2 | 50.0 ± 35.4 (1/2) | 0 | 0 | "
        f"{_calls(improve_dir / 'round-1' / 'train')} |",
        f"| 1 | test | 1 (0) | – | 2 / 2 | 100.0 ± 0.0 (2/2) | 0 | 0 | "
        f"{_calls(improve_dir / 'round-1' / 'test')} |",
    ], markdown
    # then the round benches side by side, task by task
    assert ("| miniwob.click-button | failed 0/1 | failed 0/1 | solved 1/1 | solved in "
            "round-1/test; failed in round-0/test, round-1/train |") in markdown, markdown

    page = session.page
    await page.set_viewport_size({"width": 1400, "height": 900})
    await page.goto((improve_dir / "report.html").as_uri())
    await page.screenshot(path=str(tmp_path / "improve-report.png"), full_page=True)
    cells = await page.eval_on_selector_all(
        "#rounds tbody tr", "trs => trs.map(tr => [...tr.cells].map(td => td.textContent))")
    assert [row[:2] + row[5:6] for row in cells] == [
        ["0", "test (episodes)", "50.0 ± 35.4 (1/2)"],
        ["1", "train (episodes)", "50.0 ± 35.4 (1/2)"],
        ["1", "test (episodes)", "100.0 ± 0.0 (2/2)"]], cells
    for href in await page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)"):
        assert Path(unquote(urlsplit(href).path)).is_file(), href
    await page.click("#rounds tr[data-bench='round-1/test'] a")
    assert page.url == (improve_dir / "round-1" / "test" / "report.html").as_uri()


@pytest.mark.slow
def test_report_rebuilds_what_the_loop_left_behind_its_benches(
    improve_dir: Path, tmp_path: Path,
) -> None:
    """A loop cut short records no improve.json (or not its last round); a round bench
    continued later leaves improve.json behind. The report counts the benches."""
    copy = tmp_path / "improve"
    shutil.copytree(improve_dir, copy)
    loop_rows = _table_cells((improve_dir / "improve.md").read_text())
    (copy / "improve.json").unlink()
    results = copy / "round-1" / "test" / "results.jsonl"
    first, *_ = results.read_text().splitlines()
    results.write_text(first + "\n")  # as if its second episode had not run yet
    # and as if the loop had induced a skill before it stopped (--skills-arm)
    (copy / "round-1" / "skills").mkdir()
    shutil.copy(REPO / "tests" / "data" / "skills" / "login_user.json",
                copy / "round-1" / "skills")

    done = linewise("report", str(copy))
    assert done.returncode == 0, done.stderr[-3000:]
    table = (copy / "improve.md").read_text()
    assert table.startswith("Tasks: miniwob.click-test, miniwob.click-button; training "
                            "seeds 0-0, test seeds 1-1; filter none; pruning off."), table
    assert "rebuilt from the round benches" in table
    assert "Note: round-1/test: 1 of 2 planned episodes ran" in table
    rows = _table_cells(table)
    assert rows[0][:4] == loop_rows[0] and rows[1][:3] == loop_rows[1][:3]  # memory: 1 (0)
    assert rows[1][3] == "100.0 (1/1)", rows
    assert rows[1][4:6] == ["1", "–"], rows  # one skill induced; no bench with it ran
    report = json.loads((copy / "report.json").read_text())
    assert [(a["part"], a["ran"], a["planned"]) for a in report["rounds"]][-1] == ("test", 1, 2)


def test_report_of_a_folder_that_is_neither_bench_nor_improve_is_refused(
    tmp_path: Path,
) -> None:
    (tmp_path / "round-1").mkdir()  # a round folder with no bench in it
    done = linewise("report", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"linewise: error: {tmp_path} holds no results.jsonl: is "
                                   "it a bench folder?"), done.stderr
    assert not (tmp_path / "report.md").exists() and not (tmp_path / "improve.md").exists()


@pytest.mark.slow
async def test_serve_shows_an_improve_folder_as_its_rounds(
    improve_dir: Path, session: BrowserSession,
) -> None:
    """Before: `linewise view IMPROVE_DIR --serve` was refused."""
    view = subprocess.Popen([sys.executable, "-m", "linewise.cli.main", "view",
                             str(improve_dir), "--serve", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert view.stdout is not None
        assert view.stdout.readline().startswith("viewer: ")  # written, as without --serve
        url = view.stdout.readline().split()[1]
        page = session.page
        await page.goto(url)
        await page.wait_for_selector("#rounds tbody tr")
        rounds = await page.eval_on_selector_all(
            "#rounds tbody tr", "trs => trs.map(tr => [...tr.cells].map(td => td.textContent))")
        assert rounds == _table_cells((improve_dir / "improve.md").read_text()), rounds
        hrefs = await page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)")
        assert hrefs and all(h.startswith(url.removesuffix("view/index.html")) for h in hrefs)
        await page.click("#rounds tr[data-round='1'] td[data-bench='round-1/test'] a")
        await page.wait_for_selector("#episodes tbody tr")
        assert page.url.endswith("/bench/2/view/index.html"), page.url
        outcomes = await page.eval_on_selector_all(
            "#episodes tbody tr", "trs => trs.map(tr => tr.className)")
        assert outcomes == ["success", "success"]
    finally:
        view.terminate()
        view.wait(timeout=30)
