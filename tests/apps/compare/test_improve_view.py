"""``linewise view IMPROVE_DIR``: an improve folder shown as its rounds, each round's
benches leading to their own viewers.

A real ``linewise improve`` (one round and its baseline, MiniWoB++ in Chromium, a
scripted model behind real HTTP that solves click-button only once a worked example is
in its prompt); the page is rendered in headless Chromium and its links followed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from linewise.runtime.browser.chromium import BrowserSession
from linewise.testing import ScriptedChatServer, miniwob_solver
from tests.support.cli import linewise

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


@pytest.fixture
def improve_dir(tmp_path: Path) -> Path:
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
