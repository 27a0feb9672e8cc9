"""Several benches side by side: ``linewise report A B --out DIR`` and ``linewise view
A B --out DIR``, one report and one viewer index over them; an improve folder shown as
its rounds.

Two real ``linewise bench`` runs on the same three MiniWoB++ tasks (Chromium, the
scripted model behind real HTTP): bench "good" solves all three; bench "weak" fails
click-button (its model waits instead) and its endpoint fails every enter-text call
(an infrastructure ending, not judged). Pages are rendered in headless Chromium, and
every link on them is followed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from playwright.async_api import Page

from linewise.runtime.browser.chromium import BrowserSession
from linewise.testing import ScriptedChatServer, ScriptedHTTPError, miniwob_solver
from tests.support.cli import linewise

TASKS_YAML = """\
defaults:
  max_steps: 3
tasks:
  - miniwob: click-test
    seed: 1
  - miniwob: click-button
    seed: 2
  - miniwob: enter-text
    seed: 0
"""


def weak(messages: list[dict[str, Any]]) -> str:
    prompt = messages[1]["content"]
    if "into the text field" in prompt:
        raise ScriptedHTTPError(500, "overloaded")
    if "Click on the" in prompt:
        return "<think>Not sure.</think><action>noop(100)</action>"
    return miniwob_solver(messages)


def _bench(tasks: Path, out: Path, script: Any) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    env |= {"LINEWISE_OUTAGE__INFRA_RETRIES": "0", "LINEWISE_OUTAGE__FAILURES_TO_PAUSE": "99"}
    with ScriptedChatServer(script) as llm:
        result = subprocess.run(
            [sys.executable, "-m", "linewise.cli.main", "bench", str(tasks),
             "--filter", "none", "--concurrency", "1", "--out", str(out),
             "--base-url", llm.base_url, "--model", "scripted", "--retry-budget", "0",
             "--log-json"],
            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 1, 4), result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def benches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("compare")
    (root / "tasks.yaml").write_text(TASKS_YAML)
    tasks = root / "tasks.yaml"
    yield (_bench(tasks, root / "runs" / "a" / "bench", miniwob_solver),
           _bench(tasks, root / "runs" / "b" / "bench", weak))


async def _links_resolve(page: Page, selector: str = "a[href]") -> list[str]:
    """Every link on the page leads to a file that is there; returns them."""
    hrefs = await page.eval_on_selector_all(selector, "as => as.map(a => a.href)")
    for href in hrefs:
        path = Path(unquote(urlsplit(href).path))
        assert path.is_file(), href
    return hrefs


@pytest.mark.slow
async def test_report_compares_benches_task_by_task(
    benches: tuple[Path, Path], tmp_path: Path, session: BrowserSession,
) -> None:
    """Before: `linewise report` took one folder, and nothing showed two benches side
    by side."""
    good, weak_bench = benches
    out = tmp_path / "cmp"
    # several folders and no --out: refused, with where the comparison would go
    refused = linewise("report", str(good), str(weak_bench))
    assert refused.returncode == 2 and "give --out DIR" in refused.stderr, refused.stderr
    done = linewise("report", str(good), str(weak_bench), "--out", str(out),
                    "--label", "good", "--label", "weak")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(out / f"report.{x}") for x in ("md", "html", "json")]
    # each bench got its own report, as `linewise report DIR` writes it
    assert (good / "report.md").is_file() and (weak_bench / "view" / "index.html").is_file()

    data = json.loads((out / "report.json").read_text())
    rows = {b["label"]: b for b in data["benches"]}
    assert (rows["good"]["state"]["planned"], rows["good"]["state"]["ran"]) == (3, 3)
    [weak_arm] = rows["weak"]["arms"]
    assert (weak_arm["planned"], weak_arm["ran"], weak_arm["left"]) == (3, 3, 0)
    assert weak_arm["metrics"]["judged"] == 2 and weak_arm["metrics"]["successes"] == 1
    assert weak_arm["metrics"]["infrastructure"] == 1
    assert [t["task"] for t in data["tasks"] if t["diff"]] == ["miniwob.click-button"]

    markdown = (out / "report.md").read_text()
    assert "| good | scripted | none | 3 | 3 | 0 | 3 | 100.0 ± 0.0 (n=3) | 0 |" in markdown
    assert "| weak | scripted | none | 3 | 3 | 0 | 2 | 50.0 ± 35.4 (n=2) | 1 (model 1) |" \
        in markdown, markdown
    assert ("| miniwob.click-button | solved 1/1 | failed 0/1 | solved in good; failed in "
            "weak |") in markdown
    assert ("| miniwob.enter-text | solved 1/1 | not judged: infrastructure 1 |  |"
            in markdown)
    assert ("good against weak: 1 task solved more often in good, 0 in weak, 1 alike "
            "(2 tasks judged by both).") in markdown

    page = session.page
    await page.set_viewport_size({"width": 1500, "height": 900})
    await page.goto((out / "report.html").as_uri())
    await page.screenshot(path=str(tmp_path / "compare-report.png"), full_page=True)
    assert await page.text_content("#differing tr[data-task='miniwob.click-button'] td.diff") \
        == "solved in good; failed in weak"
    states = await page.eval_on_selector_all(
        ".bench-state", "ds => ds.map(d => [d.dataset.bench, d.className, d.textContent])")
    assert [s[:2] for s in states] == [["good", "state bench-state complete"],
                                       ["weak", "state bench-state incomplete"]]
    assert "1 ended on an infrastructure fault" in states[1][2]
    hrefs = await _links_resolve(page)
    assert any(h.endswith("/runs/a/bench/report.html") for h in hrefs)
    assert any(h.endswith("/cmp/view/index.html") for h in hrefs)
    # solved here, failed there: each cell leads to the trace that says why
    cell = "#differing td[data-arm='weak'] a"
    assert await page.text_content(cell) == "seed 2"
    await page.click(cell)
    await page.wait_for_selector("body[data-shown]")
    assert (await page.text_content("#outcome") or "").startswith("failure")
    assert "miniwob.click-button" in (await page.text_content("#task") or "")


@pytest.mark.slow
async def test_view_indexes_several_benches_each_row_leading_to_its_bench(
    benches: tuple[Path, Path], tmp_path: Path, session: BrowserSession,
) -> None:
    """Before: `linewise view` took one folder."""
    good, weak_bench = benches
    out = tmp_path / "both"
    done = linewise("view", str(good), str(weak_bench), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"viewer: {(out / 'view' / 'index.html').resolve()}"

    page = session.page
    await page.set_viewport_size({"width": 1500, "height": 900})
    await page.goto((out / "view" / "index.html").as_uri())
    await page.wait_for_selector("#episodes tbody tr")
    await page.screenshot(path=str(tmp_path / "compare-index.png"), full_page=True)
    # the two folders are both named "bench": labelled by as much of their path as it takes
    benches_table = await page.eval_on_selector_all(
        "#benches tbody tr", "trs => trs.map(tr => [...tr.cells].map(td => td.textContent))")
    assert [row[:7] for row in benches_table] == [
        ["a/bench", "Complete: all 3 planned episodes ran.", "3", "3", "0", "3",
         "100.0 ± 0.0 (n=3)"],
        ["b/bench", "All 3 planned episodes ran. 1 ended on an infrastructure fault: not "
         "judged, and run again by --resume.", "3", "3", "0", "2", "50.0 ± 35.4 (n=2)"]]
    rows = await page.eval_on_selector_all(
        "#episodes tbody tr", "trs => trs.map(tr => [tr.cells[0].textContent, "
        "tr.cells[1].textContent, tr.className])")
    assert sorted(rows) == sorted([
        ["a/bench", "miniwob.click-test.seed1", "success"],
        ["a/bench", "miniwob.click-button.seed2", "success"],
        ["a/bench", "miniwob.enter-text.seed0", "success"],
        ["b/bench", "miniwob.click-test.seed1", "success"],
        ["b/bench", "miniwob.click-button.seed2", "failure"],
        ["b/bench", "miniwob.enter-text.seed0", "infra"]])
    assert (await page.text_content("#counts") or "").startswith("2 benches · 6 episodes")
    await _links_resolve(page)
    # one bench's episodes alone, then into its own episode page and its own index
    await page.click("#benches tr[data-bench='b/bench'] button")
    assert len(await page.query_selector_all("#episodes tbody tr")) == 3
    await page.click("#episodes tbody tr.failure a")
    await page.wait_for_selector("body[data-shown]")
    assert page.url.startswith((weak_bench / "view" / "episodes").as_uri())
    await page.go_back()
    await page.wait_for_selector("#benches")
    await page.click("#benches tr[data-bench='a/bench'] td a")
    await page.wait_for_selector("#episodes tbody tr")
    assert page.url == (good / "view" / "index.html").as_uri()
    assert len(await page.query_selector_all("#episodes tbody tr")) == 3


@pytest.mark.slow
def test_one_folder_keeps_its_own_report_and_view(benches: tuple[Path, Path]) -> None:
    good, _ = benches
    for command in ("report", "view"):
        refused = linewise(command, str(good), "--out", str(good.parent / "x"))
        assert refused.returncode == 2, refused.stderr
        assert ("are for comparing several benches" in refused.stderr
                or "are for one index over several benches" in refused.stderr), refused.stderr
    done = linewise("report", str(good))
    assert done.returncode == 0
    assert done.stdout.split() == [str(good / f"report.{x}") for x in ("md", "html", "json")]
    assert json.loads((good / "report.json").read_text())["bench"] == str(good)
