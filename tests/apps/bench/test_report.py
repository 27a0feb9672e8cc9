"""``linewise report``: the numbers on a hand-made results file, and the HTML as Chromium
renders it."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from linewise.apps.bench.metrics import Prices, f_ae, success_rate
from linewise.apps.bench.report import write_report
from linewise.apps.bench.report_data import build_report, task_columns
from linewise.apps.bench.report_html import filter_colors, reduction_vs_size
from linewise.apps.bench.results import EpisodeResult, ResultsWriter
from linewise.apps.bench.svg import axis_ticks, tick_label
from linewise.runtime.browser.chromium import BrowserSession

_SEEDS = itertools.count()


def _result(task: str, filter_name: str, success: bool | None, steps: int, **extra: Any
            ) -> EpisodeResult:
    seed = next(_SEEDS)
    return EpisodeResult(
        task_id=f"{task}.seed{seed}", base_task=task,
        benchmark=extra.pop("benchmark", "miniwob"), seed=seed, filter=filter_name,
        agent="gpt-x", success=success, n_steps=steps, max_steps=10, **extra,
    )


def _bench(tmp_path: Path) -> Path:
    rows = [
        _result("miniwob.a", "none", True, 2, action_prompt_tokens=1000,
                action_completion_tokens=100, step_obs_tokens=[(500, 500), (600, 600)],
                reduction=0.0, wall_s=2.0),
        _result("miniwob.b", "none", True, 4, action_prompt_tokens=3000,
                action_completion_tokens=100, step_obs_tokens=[(3000, 3000)] * 4,
                reduction=0.0, wall_s=4.0),
        _result("miniwob.a", "none", False, 3, action_prompt_tokens=2000,
                step_obs_tokens=[(500, 500)] * 3, reduction=0.0, wall_s=3.0,
                repeats_escaped=2, repeats_kept=1),
        _result("miniwob.b", "none", False, 10, termination="timeout", error="timed out",
                error_kind="timeout", wall_s=30.0),
        _result("miniwob.a", "lines+structure", True, 2, action_prompt_tokens=400,
                action_completion_tokens=40, retriever_prompt_tokens=1200,
                retriever_completion_tokens=60, step_obs_tokens=[(500, 200), (600, 150)],
                reduction=0.675, wall_s=3.0),
        _result("miniwob.b", "lines+structure", True, 2, action_prompt_tokens=800,
                repeats_escaped=1,
                retriever_prompt_tokens=6000, retriever_completion_tokens=80,
                step_obs_tokens=[(3000, 900), (9000, 1800)], reduction=0.75, wall_s=5.0),
        _result("miniwob.a", "lines+structure", False, 5, error="LLMError: 500",
                error_kind="model", step_obs_tokens=[(20000, 5000)], reduction=0.75),
        _result("docs", "lines+structure", None, 3, benchmark="web",
                step_obs_tokens=[(1500, 300)] * 3, reduction=0.8),
    ]
    with ResultsWriter(tmp_path / "results.jsonl") as writer:
        for row in rows:
            writer.append(row)
    return tmp_path


def test_success_rate_and_f_ae_match_the_papers_formulas() -> None:
    assert success_rate([]) == (None, None)
    rate, se = success_rate([True, True, False, False])
    assert rate == 0.5 and se == pytest.approx(0.25)
    assert success_rate([True]) == (1.0, None)  # one episode: no error, not "± 0"
    # WebClipper Appendix A: harmonic mean of Acc and E = 1 - Rounds/Max_Rounds
    assert f_ae(0.5, 4.75, 10) == pytest.approx(2 * 0.5 * 0.525 / 1.025)
    assert f_ae(1.0, 0, 100) == 1.0 and f_ae(0.0, 5, 100) == 0.0
    assert f_ae(0.9, 200, 100) == 0.0  # beyond Max_Rounds efficiency is 0, not negative


def test_report_numbers(tmp_path: Path) -> None:
    bench = _bench(tmp_path)
    report, written = write_report(bench, Prices(), None)
    assert [p.name for p in written] == ["report.md", "report.html", "report.json"]
    groups = {g.label["filter"]: g for g in report.overall}
    none, lines = groups["none"], groups["lines+structure"]
    # the timed-out episode is an infrastructure ending: beside the rate, not in it
    assert none.episodes == 4 and none.successes == 2 and none.judged == 3
    assert none.infrastructure == 1 and none.infra_kinds == {"timeout": 1}
    assert none.success_rate == pytest.approx(2 / 3)
    assert none.success_se == pytest.approx(math.sqrt(2 / 3 * 1 / 3 / 3))
    assert none.steps == pytest.approx(3.0) and none.max_rounds == 10
    assert none.f_ae == pytest.approx(2 * 2 / 3 * 0.7 / (2 / 3 + 0.7))
    assert none.errors == {"timeout": 1}
    assert (none.repeats_escaped, none.repeats_kept) == (2, 1)
    assert (lines.repeats_escaped, lines.repeats_kept) == (1, 0)
    # every mean is over the 3 agent outcomes, the timed-out episode in none of them
    assert none.agent_episodes == 3
    assert none.action_tokens_per_episode == pytest.approx((1100 + 3100 + 2000) / 3)
    assert none.action_tokens_per_step == pytest.approx(6200 / 9)
    assert none.wall_s == pytest.approx((2.0 + 4.0 + 3.0) / 3)
    assert none.reduction == 0.0
    # unknown success (a web task without a check) is left out of the rate, not a failure;
    # so is the episode whose model endpoint failed (infrastructure)
    assert lines.episodes == 4 and lines.judged == 2 and lines.successes == 2
    assert lines.infrastructure == 1 and lines.infra_kinds == {"model": 1}
    assert lines.success_rate == 1.0 and lines.success_se == 0.0
    assert lines.reduction == pytest.approx((0.675 + 0.75 + 0.8) / 3)
    assert lines.retriever_tokens_per_episode == pytest.approx((1260 + 6080) / 3)
    assert lines.errors == {"model": 1}
    cost = (400 * 2.0 + 40 * 8.0 + 1200 * 0.4 + 60 * 1.6) / 1e6 + (
        800 * 2.0 + 6000 * 0.4 + 80 * 1.6) / 1e6
    assert lines.cost_total == pytest.approx(cost)
    assert {(g.label["benchmark"], g.label["filter"]): g.episodes
            for g in report.by_benchmark} == {
        ("miniwob", "lines+structure"): 3, ("miniwob", "none"): 4, ("web", "lines+structure"): 1}
    tasks = {(g.label["task"], g.label["filter"]): g for g in report.by_task}
    assert tasks[("miniwob.a", "none")].episodes == 2
    assert tasks[("miniwob.a", "none")].success_rate == 0.5

    markdown = (bench / "report.md").read_text()
    # results lines written before lines kept was recorded have none: "-", not 0
    assert ("| gpt-x | none | 4 | 3 | 66.7 ± 27.2 (n=3) | 1 (timeout 1) | 0 | 0.683 | 3.0 "
            "| - | 0.0 |") in markdown
    assert "timeout 1" in markdown and "model 1" in markdown
    assert "| 2 / 1 | timeout 1 |" in markdown
    assert "| miniwob.b | lines+structure | gpt-x | 1 | 1 | 100.0 (n=1) | 0 | 0 | 2.0 |" in markdown
    # a fixed Max_Rounds (the paper's 100) changes F-AE only
    fixed, _ = write_report(bench, Prices(), 100)
    assert fixed.overall[1].f_ae == pytest.approx(2 * 2 / 3 * 0.97 / (2 / 3 + 0.97))


def test_report_command(tmp_path: Path) -> None:
    bench = _bench(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "linewise.cli.main", "report", str(bench),
         "--price-action-input", "1", "--max-rounds", "20"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "report.html" in result.stdout
    assert "$1/$8 per 1M action" in (bench / "report.md").read_text()


async def test_html_report_renders_with_its_plots(
    tmp_path: Path, session: BrowserSession
) -> None:
    bench = _bench(tmp_path)
    write_report(bench)
    page = session.page
    await page.goto((bench / "report.html").as_uri())
    png = await page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert png[:4] == b"\x89PNG" and len(png) > 20_000
    plots = await page.eval_on_selector_all(
        "svg.plot",
        """svgs => svgs.map(svg => ({
            name: svg.dataset.plot,
            width: svg.getBoundingClientRect().width,
            marks: [...svg.querySelectorAll('circle.point, rect.box')]
                .filter(e => { const b = e.getBoundingClientRect();
                               return b.width > 0 && b.height > 0; }).length,
            legend: svg.querySelectorAll('.legend rect').length,
        }))""",
    )
    by_name = {p["name"]: p for p in plots}
    assert set(by_name) == {"success-vs-reduction", "token-distributions", "reduction-vs-size"}
    assert all(p["width"] > 300 for p in plots)
    assert by_name["success-vs-reduction"]["marks"] == 2  # one point per filter
    assert by_name["token-distributions"]["marks"] >= 3
    # lines+structure steps span 150..20000 tokens: several size bins, none filter left out
    assert by_name["reduction-vs-size"]["marks"] >= 4
    assert by_name["reduction-vs-size"]["legend"] == 1
    rows = await page.eval_on_selector_all("table", "ts => ts.map(t => t.rows.length)")
    assert rows == [3, 4, 6]


def test_assisted_episodes_and_step_errors_are_reported_beside_the_rate(
    tmp_path: Path,
) -> None:
    """A person's success is not the agent's: out of the rate, in its own column; steps
    whose action failed show under errors although the episode itself ended cleanly."""
    rows = [
        _result("miniwob.a", "none", True, 2),
        _result("miniwob.a", "none", False, 3, action_errors=3),
        _result("miniwob.a", "none", True, 4, outcome="assisted", assisted_steps=2),
    ]
    with ResultsWriter(tmp_path / "results.jsonl") as writer:
        for row in rows:
            writer.append(row)
    report, _ = write_report(tmp_path)
    [group] = report.overall
    assert (group.judged, group.successes, group.assisted) == (2, 1, 1)
    assert group.success_rate == 0.5
    assert group.step_errors == {"action": 3}
    markdown = (tmp_path / "report.md").read_text()
    header, _, row = markdown.split("## Agents and filters")[1].strip().splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")],
                     strict=True))
    assert cells["assisted"] == "1" and cells["success % ± SE"] == "50.0 ± 35.4 (n=2)"
    assert cells["errors"] == "3 action error steps"
    per_task = markdown.split("## Per task")[1]
    assert "| miniwob.a | none | gpt-x | 3 | 2 | 50.0 ± 35.4 (n=2) | 0 | 1 | 2.5 |" in per_task
    only_assisted = [_result("miniwob.c", "none", True, 4, outcome="assisted")]
    report = build_report(only_assisted, "b", Prices())
    # no rate, no steps, no means: nothing the agent did alone
    assert task_columns(report.by_task[0])[4:11] == ["0", "-", "0", "1", "-", "-", "-"]


async def test_every_mark_lies_inside_its_chart(tmp_path: Path, session: BrowserSession) -> None:
    """Extremes that clipped before: a point at x = 0 and y = 100, an error bar past
    100 %, a filter whose steps grew the page (negative reduction), long filter names."""
    long_name = "lines+structure+a-very-long-filter-name"
    rows = [
        _result("miniwob.a", "none", True, 1, step_obs_tokens=[(100, 100)], reduction=0.0),
        _result("miniwob.b", "none", True, 1, step_obs_tokens=[(90, 90)], reduction=0.0),
        _result("miniwob.a", long_name, True, 2, step_obs_tokens=[(100, 180), (5000, 50)],
                reduction=0.1, action_prompt_tokens=90_000),
        _result("miniwob.b", long_name, False, 2, step_obs_tokens=[(120, 250)], reduction=-1.0),
    ]
    with ResultsWriter(tmp_path / "results.jsonl") as writer:
        for row in rows:
            writer.append(row)
    write_report(tmp_path)
    page = session.page
    await page.goto((tmp_path / "report.html").as_uri())
    outside = await page.eval_on_selector_all(
        "svg.plot",
        """svgs => svgs.flatMap(svg => {
            const chart = svg.getBoundingClientRect();
            const frame = svg.querySelector('rect.frame').getBoundingClientRect();
            const within = (b, r) => b.left >= r.left - 0.5 && b.right <= r.right + 0.5 &&
                                     b.top >= r.top - 0.5 && b.bottom <= r.bottom + 0.5;
            const out = [];
            for (const e of svg.querySelectorAll('*')) {
                const b = e.getBoundingClientRect();
                if (!b.width && !b.height) continue;
                const what = `${svg.dataset.plot}: ${e.tagName}.${e.getAttribute('class')}`;
                if (!within(b, chart)) out.push(`${what} off the chart`);
                const mark = 'circle.point, rect.box, line.whisker, line.error-bar';
                if (e.matches(mark) && !within(b, frame)) out.push(`${what} off the frame`);
            }
            return out;
        })""",
    )
    assert outside == []
    marks = await page.locator("circle.point, rect.box, line.whisker, line.error-bar").count()
    assert marks >= 8


@pytest.mark.parametrize("low, high", [(0, 100), (-8.7, 100), (0, 10_242), (0, 0.3),
                                       (3, 3), (0, 2_600_000), (1500, 1800)])
def test_axis_ticks_are_round_cover_the_values_and_read_exactly(low: float, high: float) -> None:
    ticks = axis_ticks(low, high)
    assert ticks[0] <= low and ticks[-1] >= high and 3 <= len(ticks) <= 7
    for tick in ticks:
        label = tick_label(tick)
        scale = {"k": 1e3, "M": 1e6}.get(label[-1], 1)
        assert float(label.rstrip("kM")) * scale == pytest.approx(tick), label


def test_a_filter_that_cut_nothing_keeps_its_boxes_in_the_size_plot() -> None:
    """auto shows a small page whole: its boxes at 0 say so, where leaving it out read
    as a filter that never ran; none, whole by definition, is left out."""
    results = [
        _result("miniwob.a", "auto", True, 2, step_obs_tokens=[(300, 300), (400, 400)],
                step_reductions=[0.0, 0.0]),
        _result("miniwob.a", "bm25", True, 2, step_obs_tokens=[(300, 120), (400, 200)],
                step_reductions=[0.5, 0.4]),
        _result("miniwob.a", "none", True, 2, step_obs_tokens=[(300, 300), (400, 400)]),
    ]
    svg = reduction_vs_size(results, filter_colors(results))
    assert ">auto<" in svg and ">bm25<" in svg and ">none<" not in svg
