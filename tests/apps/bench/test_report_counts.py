"""The report and the viewer count the same episodes, each once, and every mean of the
report is over one named denominator.

One real ``linewise bench`` (MiniWoB++ in Chromium, the scripted model behind real
HTTP) where the model endpoint fails on purpose: click-button's first call gets a 500,
so its first attempt ends on an infrastructure fault and the bench runs it again (an
agent success); every enter-text call gets a 500, so both its attempts end so, and its
last stands as an infrastructure ending with no token spent. Two earlier attempts are
set aside under ``_infra/``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from linewise.apps.bench.plan import INCOMPLETE_DIR, INFRA_DIR
from linewise.apps.bench.results import read_results
from linewise.apps.viewer.discover import ATTEMPT_DIRS, attempt_of
from linewise.runtime.browser.chromium import BrowserSession
from linewise.testing import ScriptedChatServer, ScriptedHTTPError, miniwob_solver

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


def _failing_endpoint() -> Any:
    """miniwob_solver, but click-button's first call and every enter-text call fail."""
    calls: dict[str, int] = {}
    lock = threading.Lock()

    def script(messages: list[dict[str, Any]]) -> str:
        prompt = messages[1]["content"]
        task = ("click-button" if "Click on the" in prompt
                else "enter-text" if "into the text field" in prompt else "click-test")
        with lock:
            calls[task] = calls.get(task, 0) + 1
            first = calls[task] == 1
        if task == "enter-text" or (task == "click-button" and first):
            raise ScriptedHTTPError(500, "overloaded")
        return miniwob_solver(messages)

    return script


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("counts")
    (root / "tasks.yaml").write_text(TASKS_YAML)
    out = root / "bench"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    # one rerun in the bench, no pause for the outage: the failures are the episodes'
    env |= {"LINEWISE_OUTAGE__INFRA_RETRIES": "1", "LINEWISE_OUTAGE__FAILURES_TO_PAUSE": "99"}
    with ScriptedChatServer(_failing_endpoint()) as llm:
        result = subprocess.run(
            [sys.executable, "-m", "linewise.cli.main", "bench", str(root / "tasks.yaml"),
             "--filter", "none", "--concurrency", "1", "--out", str(out),
             "--base-url", llm.base_url, "--model", "scripted", "--retry-budget", "0",
             "--log-json"],
            env=env, capture_output=True, text=True, timeout=300,
        )
    assert result.returncode == 4, result.stderr[-3000:]  # enter-text's infra ending
    yield out


def _ran_as_planned(out: Path) -> None:
    """What the fixture meant to make: 3 episodes, 2 earlier attempts set aside."""
    results = {r.base_task: r for r in read_results(out / "results.jsonl")}
    assert {k: (r.outcome, r.success) for k, r in results.items()} == {
        "miniwob.click-test": ("agent", True), "miniwob.click-button": ("agent", True),
        "miniwob.enter-text": ("infrastructure", False)}
    assert results["miniwob.enter-text"].action_tokens == 0
    assert len(list((out / "_infra" / "none").iterdir())) == 2


def test_the_viewer_knows_the_folders_a_bench_sets_attempts_aside_in() -> None:
    """The viewer may not import the bench (the bench imports the viewer): the names
    are written twice, and must stay the same."""
    assert ATTEMPT_DIRS == (INFRA_DIR, INCOMPLETE_DIR)
    assert attempt_of("_infra/none/miniwob.click-test.seed1.20261129-030744-147584") == (
        "none/miniwob.click-test.seed1")
    assert attempt_of("_incomplete/lines_structure/docs.20250101-120000") == (
        "lines_structure/docs")
    assert attempt_of("none/miniwob.click-test.seed1") is None
    assert attempt_of("_infra/none/named-without-a-stamp") is None


@pytest.mark.slow
async def test_the_viewer_counts_each_episode_once_as_the_report_does(
    bench: Path, session: BrowserSession, tmp_path: Path,
) -> None:
    """Before: the two attempts under _infra/ were rows of their own (5 episodes, 3
    infrastructure faults against the report's 3 and 1)."""
    _ran_as_planned(bench)
    report = json.loads((bench / "report.json").read_text())
    [group] = report["overall"]
    assert (report["episodes"], group["infrastructure"]) == (3, 1)
    assert report["state"]["earlier_attempts"] == 2
    assert "2 earlier attempts were set aside" in (bench / "report.md").read_text()

    page = session.page
    await page.set_viewport_size({"width": 1500, "height": 700})
    await page.goto((bench / "view" / "index.html").as_uri())
    await page.wait_for_selector("#episodes tbody tr")
    rows = await page.eval_on_selector_all(
        "#episodes tbody tr", """trs => trs.map(tr => ({
            task: tr.cells[0].textContent, kind: tr.className,
            attempts: tr.querySelector('td.attempts').textContent.trim(),
            links: [...tr.querySelectorAll('td.attempts a')].map(a => a.getAttribute('href')),
        }))""")
    await page.screenshot(path=str(tmp_path / "index.png"), full_page=True)
    by_task = {row["task"]: row for row in rows}
    assert len(rows) == report["episodes"] == 3, rows
    assert by_task["miniwob.click-test.seed1"]["attempts"] == "1"
    assert by_task["miniwob.click-button.seed2"]["attempts"] == "2 #1 infra (model)"
    assert by_task["miniwob.enter-text.seed0"]["kind"] == "infra"
    counts = await page.text_content("#counts") or ""
    assert "3 episodes" in counts and "(not counted: 1 infrastructure faults)" in counts
    assert "2 earlier attempts set aside" in counts

    # the earlier attempt has its own page, which says what it is and leads to the last
    [earlier] = by_task["miniwob.click-button.seed2"]["links"]
    await page.click(f"a[href='{earlier}']")
    await page.wait_for_selector("body[data-shown]")
    banner = await page.text_content("#attempt") or ""
    assert "earlier attempt" in banner and "its last attempt" in banner
    assert "infrastructure fault (model)" in (await page.text_content("#outcome") or "")
    await page.click("#attempt a")
    await page.wait_for_selector("body[data-shown]")
    assert page.url.endswith("episodes/none__miniwob.click-button.seed2.html#step=0")
    assert await page.is_hidden("#attempt")
    assert (await page.text_content("#outcome") or "").startswith("success")


@pytest.mark.slow
async def test_every_mean_of_the_report_is_over_its_agent_outcomes(
    bench: Path, session: BrowserSession, tmp_path: Path,
) -> None:
    """Before: tokens, cost and wall time per episode averaged in enter-text's
    infrastructure ending (0 tokens) while steps left it out, its box reached 0, and no
    n was shown beside the rate."""
    _ran_as_planned(bench)
    results = read_results(bench / "results.jsonl")
    agent = [r for r in results if r.outcome == "agent"]
    report = json.loads((bench / "report.json").read_text())
    [group] = report["overall"]
    assert group["agent_episodes"] == 2 and group["judged"] == 2
    assert group["action_tokens_per_episode"] == pytest.approx(
        sum(r.action_tokens for r in agent) / 2)
    assert group["wall_s"] == pytest.approx(sum(r.wall_s for r in agent) / 2)
    assert group["steps"] == pytest.approx(sum(r.n_steps for r in agent) / 2)
    assert group["action_tokens_per_step"] == pytest.approx(
        sum(r.action_tokens for r in agent) / sum(r.n_steps for r in agent))
    # the per-task row of an infrastructure ending alone has no means at all
    enter = next(g for g in report["by_task"] if g["label"]["task"] == "miniwob.enter-text")
    assert enter["agent_episodes"] == 0

    markdown = (bench / "report.md").read_text()
    table = markdown.split("## Agents and filters")[1].strip().splitlines()
    cells = dict(zip([c.strip() for c in table[0].split("|")],
                     [c.strip() for c in table[2].split("|")], strict=True))
    assert cells["episodes"] == "3" and cells["agent outcomes (n)"] == "2"
    assert cells["success % ± SE"] == "100.0 ± 0.0 (n=2)"
    assert cells["action tok/episode"] == f"{sum(r.action_tokens for r in agent) / 2:,.0f}"
    assert "One denominator per row" in markdown
    tasks = markdown.split("## Per task")[1]
    assert "| miniwob.enter-text | none | scripted | 1 | 0 | - | 1 (model 1) | 0 | - | - | - |" \
        in tasks, tasks

    page = session.page
    await page.goto((bench / "report.html").as_uri())
    await page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    boxes = await page.eval_on_selector_all(
        "svg[data-plot='token-distributions'] rect.box", "rs => rs.map(r => r.textContent)")
    counts = await page.eval_on_selector_all(
        "svg[data-plot='token-distributions'] text.count", "ts => ts.map(t => t.textContent)")
    # one box per model, each of the 2 agent outcomes, none reaching 0 for enter-text
    assert [b.split(":")[1].split(",")[0].strip() for b in boxes] == ["n=2", "n=2"]
    assert counts == ["n=2", "n=2"]
    median = statistics.median(r.action_tokens for r in agent)
    assert f"median {median:.3g}" in boxes[0], boxes
