"""Replays in the bench's numbers: their own outcome columns beside the agent's, never
in its success rate, with the model calls and tokens they saved and why they diverged.

Computed from a real bench run with a replay cache (MiniWoB++, a scripted model behind
real HTTP), and from the results lines of real replays of a local page (recorded,
replayed, diverged, healed), the HTML rendered in Chromium.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.apps.bench.metrics import summarize
from linewise.apps.bench.plan import EpisodeSpec
from linewise.apps.bench.report import write_report
from linewise.apps.bench.report_data import build_report, overall, replay_line
from linewise.apps.bench.report_markdown import render_markdown
from linewise.apps.bench.results import (
    EpisodeResult,
    ResultsWriter,
    read_results,
    result_from_summary,
)
from linewise.records import EpisodeSummary
from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.trace import read_steps
from linewise.testing import ScriptedChatServer, miniwob_solver
from tests.support.replays import ReplayEpisodes

TASKS_YAML = """\
defaults:
  max_steps: 4
tasks:
  - miniwob: enter-text
    seed: 0
"""


def _table(markdown: str, section: str) -> list[dict[str, str]]:
    """The rows of the first table under ``## section``, as header -> cell."""
    lines = [line for line in markdown.split(f"## {section}\n")[1].split("\n## ")[0]
             .splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(header, [c.strip() for c in line.strip("|").split("|")], strict=True))
            for line in lines[2:]]


@pytest.fixture(scope="module")
def cached_bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A bench of one task under two filters with a replay cache: the first filter's
    episode is the agent's and leaves its program in the cache, the second replays it."""
    root = tmp_path_factory.mktemp("replay-bench")
    (root / "tasks.yaml").write_text(TASKS_YAML)
    out = root / "bench"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    with ScriptedChatServer(miniwob_solver) as llm:
        result = subprocess.run(
            [sys.executable, "-m", "linewise.cli.main", "bench", str(root / "tasks.yaml"),
             "--filter", "none", "--filter", "truncate", "--concurrency", "1",
             "--out", str(out), "--replay-cache", str(root / "cache"),
             "--base-url", llm.base_url, "--model", "scripted", "--log-json"],
            env=env, capture_output=True, text=True, timeout=300,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    yield out, result.stdout


@pytest.mark.slow
def test_a_cached_replay_in_a_bench_is_counted_apart_with_what_it_saved(
    cached_bench: tuple[Path, str],
) -> None:
    out, printed = cached_bench
    lines = {r.filter: r for r in read_results(out / "results.jsonl")}
    agent, replay = lines["none"], lines["truncate"]
    assert (agent.outcome, agent.success, agent.llm_calls) == ("agent", True, 2)
    assert (replay.outcome, replay.success, replay.llm_calls) == ("replayed", True, 0)
    # the replay's line names what the recorded run it stands for spent
    assert replay.recorded_llm_calls == 2
    assert replay.recorded_tokens == agent.action_tokens > 0

    assert "success 100.0 % of 1 agent outcomes" in printed
    assert ("replays, not counted in the success rate: 1 replayed (1 succeeded), "
            "0 healed (0 succeeded), diverged 0; model calls saved 2 of 2 (100.0 %)"
            in printed)

    markdown = (out / "report.md").read_text()
    rows = {row["filter"]: row for row in _table(markdown, "Agents and filters")}
    assert rows["none"]["success % ± SE"] == "100.0 (n=1)" and rows["none"]["replayed"] == "0"
    # the replay is no success of the agent's: its filter has no agent rate at all
    assert rows["truncate"]["success % ± SE"] == "-" and rows["truncate"]["steps"] == "-"
    assert [rows["truncate"][k] for k in ("replayed", "replayed ok", "replayed %",
                                          "healed", "healed ok", "healed %")] == [
        "1", "1", "100.0", "0", "0", "-"]
    # nor are its empty views the filter's reduction, or its zero tokens the agent's
    assert rows["truncate"]["tokens cut %"] == "-"
    assert rows["truncate"]["lines kept %"] == "-"
    assert rows["truncate"]["action tok/episode"] == "-"
    assert rows["truncate"]["cost/episode"] == "-"
    [saved] = _table(markdown, "Replays")
    assert saved["calls saved"] == "2 of 2 (100.0 %)"
    assert saved["saved measured against"] == "recorded run 1, task mean 0"
    tasks = {row["filter"]: row for row in _table(markdown, "Per task")}
    assert [tasks["none"][k] for k in ("success % ± SE", "replayed", "tokens/episode")] == [
        "100.0 (n=1)", "0", f"{agent.action_tokens:,}"]
    assert [tasks["truncate"][k] for k in ("success % ± SE", "replayed", "replayed ok",
                                           "tokens/episode")] == ["-", "1", "1", "-"]


@pytest.mark.slow
async def test_the_html_report_shows_the_replay_section(
    cached_bench: tuple[Path, str], session: BrowserSession, tmp_path: Path,
) -> None:
    out, _ = cached_bench
    page = session.page
    await page.set_viewport_size({"width": 1500, "height": 1000})
    await page.goto((out / "report.html").as_uri())
    headers = await page.eval_on_selector_all(
        "table", "ts => ts.map(t => [...t.rows[0].cells].map(c => c.textContent))")
    assert headers[0][7:13] == ["replayed", "replayed ok", "replayed %", "healed",
                                "healed ok", "healed %"]
    assert await page.is_visible("h2#replays")
    section = await page.locator("h2#replays + p").text_content() or ""
    assert "1 episode followed a recorded program" in section
    cells = await page.locator("h2#replays ~ table").first.locator("td").all_text_contents()
    assert "2 of 2 (100.0 %)" in cells
    await page.screenshot(path=str(tmp_path / "report-replays.png"), full_page=True)


@pytest.fixture(scope="module")
def episodes(replay_episodes: ReplayEpisodes) -> ReplayEpisodes:
    return replay_episodes


def _line(summary: EpisodeSummary, seed: int = 0) -> EpisodeResult:
    """The results line of a real episode, as a bench writes it (as seed ``seed``, and
    with one model, as a bench has: these replays ran without one, or with a healer)."""
    assert summary.directory is not None and summary.task is not None
    task = {**summary.task, "id": f"remind.seed{seed}"}
    spec = EpisodeSpec.model_validate({"task": task, "base_task": "remind",
                                       "seed": seed, "filter": "none", "benchmark": "web"})
    line = result_from_summary(spec, summary, read_steps(summary.directory), backend="local")
    return line.model_copy(update={"agent": "scripted"})


@pytest.mark.slow
def test_replays_are_measured_against_their_recording_or_the_tasks_mean(
    episodes: ReplayEpisodes, tmp_path: Path,
) -> None:
    e = episodes
    calls = e.agent.tokens.llm_calls
    assert calls == 4 and e.healed.tokens.llm_calls == 1
    results = [_line(s, seed) for seed, s in
               enumerate((e.agent, e.replayed, e.detached, e.diverged, e.healed))]
    agent, replayed, detached, diverged, healed = results
    assert replayed.recorded_llm_calls == calls and healed.recorded_llm_calls == calls
    assert detached.recorded_llm_calls is None  # its program file names no episode
    # a replay that diverged is a replay's ending, not an error (nor run again)
    assert diverged.error_kind is None and diverged.is_final

    group = summarize(results, {"all": "all"}, Prices())
    assert (group.judged, group.successes, group.success_rate) == (1, 1, 1.0)
    m = group.replay
    assert m is not None
    assert (m.replayed, m.replayed_successes, m.replayed_rate) == (3, 2, pytest.approx(2 / 3))
    assert (m.healed, m.healed_successes, m.healed_rate) == (1, 1, 1.0)
    assert (m.from_recorded, m.from_task_mean, m.unmeasured) == (2, 1, 0)
    assert m.baseline_llm_calls == 3 * calls and m.measured_llm_calls == 1
    assert m.calls_saved == 3 * calls - 1
    assert m.baseline_tokens == 3 * agent.action_tokens
    assert m.tokens_saved == 3 * agent.action_tokens - healed.action_tokens
    assert (m.diverged, m.divergences, m.fell_back) == (1, {"none": 1}, 0)
    # the agent's means are its own episodes': one of 4 steps
    assert group.steps == 4 and group.action_tokens_per_episode == agent.action_tokens

    with ResultsWriter(tmp_path / "results.jsonl") as writer:
        for result in results:
            writer.append(result)
    write_report(tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    [row] = _table(markdown, "Agents and filters")
    assert (row["episodes"], row["success % ± SE"], row["replayed"], row["replayed ok"],
            row["replayed %"], row["healed"], row["healed ok"], row["healed %"]) == (
        "5", "100.0 (n=1)", "3", "2", "66.7", "1", "1", "100.0")
    assert row["errors"] == "-"
    [saved] = _table(markdown, "Replays")
    assert saved["calls saved"] == "11 of 12 (91.7 %)"
    assert saved["saved measured against"] == "recorded run 2, task mean 1"
    assert saved["diverged"] == "1 (none 1)"
    assert saved["model calls made"].startswith("1 (")
    assert "4 episodes followed a recorded program" in markdown
    line = replay_line(overall(results, Prices()))
    assert line is not None and "3 replayed (2 succeeded), 1 healed (1 succeeded)" in line
    assert "diverged 1 (none 1)" in line and "model calls saved 11 of 12" in line
    assert json.loads((tmp_path / "report.json").read_text())["overall"][0]["replay"][
        "diverged"] == 1

    # the replay cache's fall-back: healing failed and the model went on as an agent
    assert healed.replay is not None
    took_over = healed.model_copy(update={"replay": healed.replay.model_copy(update={
        "fell_back_at": 2, "detail": "several: 2 elements button 'Send'"})})
    m = summarize([agent, took_over], {"all": "all"}, Prices()).replay
    assert m is not None and (m.healed, m.diverged, m.fell_back) == (1, 1, 1)
    assert m.divergences == {"several": 1}

    # the same bench without its replays reads as a bench before replays existed
    only_agent = build_report(results[:1], "b", Prices())
    assert "replayed" not in render_markdown(only_agent)
    assert "replay" not in only_agent.model_dump_json()
