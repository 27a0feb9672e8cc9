"""``linewise view --serve`` follows a bench while it runs: the index's step and token
counts and the open episode's header change as steps are written, without a reload.

A real ``linewise bench`` on MiniWoB++ (the scripted model behind real HTTP, slowed down
so that each step takes a while) and a real ``linewise view --serve`` process; the pages
are rendered in headless Chromium.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page

from linewise.runtime.browser.chromium import BrowserSession
from linewise.testing import ScriptedChatServer, miniwob_solver, prompt_section

NOOPS = 6
TASKS = f"""\
defaults:
  max_steps: {NOOPS + 2}
tasks:
  - miniwob: click-test
    seed: 7
"""
EPISODE = "none/miniwob.click-test.seed7"
LINEWISE = [sys.executable, "-m", "linewise.cli.main"]


def dawdler(messages: list[dict[str, Any]]) -> str:
    """Waits ``NOOPS`` steps (each a new wait, so no repeat), then clicks."""
    waited = prompt_section(messages[1]["content"], "History of your previous steps").count(
        "noop(")
    if waited < NOOPS:
        return f"<think>Not yet.</think><action>noop({100 + waited})</action>"
    return miniwob_solver(messages)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}


def _wait_for(check: Any, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


async def _running_counts(page: Page) -> tuple[int, int]:
    steps, tokens = await page.evaluate("""() => {
        const tr = [...document.querySelectorAll('#episodes tbody tr')]
          .find(tr => tr.cells[0].textContent === 'miniwob.click-test.seed7');
        return [Number(tr.cells[6].textContent), Number(tr.cells[7].textContent.replace(/,/g, ''))];
    }""")
    return int(steps), int(tokens)


@pytest.mark.slow
async def test_serve_updates_counts_of_running_episodes_without_a_reload(
    tmp_path: Path, session: BrowserSession,
) -> None:
    """Before: a running episode's row read 0 steps and 0 tokens until it ended (its
    summary counts none until then), and its page's header had no counts at all."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    out = tmp_path / "bench"
    with ScriptedChatServer(dawdler, delay_s=1.5) as llm:
        bench = subprocess.Popen(
            [*LINEWISE, "bench", str(tasks), "--filter", "none", "--concurrency", "1",
             "--out", str(out), "--base-url", llm.base_url, "--model", "scripted",
             "--no-screenshots", "--log-json"],
            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        view = None
        try:
            _wait_for(lambda: (out / EPISODE / "summary.json").exists(), "the episode to start")
            view = subprocess.Popen([*LINEWISE, "view", str(out), "--serve", "--port", "0"],
                                    env=_env(), stdout=subprocess.PIPE, text=True)
            assert view.stdout is not None
            url = ""
            while not url.startswith("serving "):
                url = view.stdout.readline()
                assert url, "linewise view --serve printed no URL"
            url = url.split()[1]

            page = session.page
            await page.goto(url)
            await page.wait_for_function("""() => [...document.querySelectorAll(
                '#episodes tbody tr.running')].length === 1""")
            await page.evaluate("window.notReloaded = true")
            # the row counts its steps as they are written, while it runs
            await page.wait_for_function("""() => {
                const tr = document.querySelector('#episodes tbody tr.running');
                return tr && Number(tr.cells[6].textContent) >= 1;
            }""", timeout=60_000)
            first = await _running_counts(page)
            assert first[1] > 0, first
            await page.wait_for_function(f"""() => {{
                const tr = document.querySelector('#episodes tbody tr.running');
                return tr && Number(tr.cells[6].textContent) > {first[0]};
            }}""", timeout=60_000)
            later = await _running_counts(page)
            assert later[1] > first[1], (first, later)
            assert await page.evaluate("window.notReloaded") is True
            await page.screenshot(path=str(tmp_path / "live-index.png"), full_page=True)

            # the small endpoint the index polls
            live_url = url.replace("index.html", "data/live.json")
            with urllib.request.urlopen(live_url, timeout=10) as answer:
                live = json.loads(answer.read())
            assert live["running"] is True
            [(key, row)] = live["episodes"].items()
            assert key == "none__miniwob.click-test.seed7" and row["status"] == "running"
            assert row["steps"] >= later[0] and row["tokens"] >= later[1]

            # the episode's page: its header counts steps and tokens so far
            await page.click("#episodes tbody tr.running a")
            await page.wait_for_selector("body[data-shown]")
            await page.evaluate("window.notReloaded = true")
            counts = await page.text_content("#counts") or ""
            assert counts.endswith("tokens so far"), counts
            await page.wait_for_function(
                "before => document.getElementById('counts').textContent !== before",
                arg=counts, timeout=60_000)
            assert await page.evaluate("window.notReloaded") is True
            # it opened on the newest step and follows the steps as they come
            await page.wait_for_function("""() => {
                const m = document.getElementById('step-label').textContent
                  .match(/^step (\\d+) \\((\\d+) of (\\d+)\\)$/);
                return m && m[2] === m[3] && Number(m[3]) >= 2;
            }""", timeout=60_000)
            await page.wait_for_selector("#outcome.ok", timeout=90_000)
            ended = await page.text_content("#counts") or ""
            assert ended.startswith(f"{NOOPS + 1} steps · ") and ended.endswith(" tokens"), ended
            await page.screenshot(path=str(tmp_path / "live-episode.png"), full_page=True)

            # back on the index, the ended episode is loaded again: outcome and counts
            await page.go_back()
            await page.wait_for_selector("#episodes tbody tr.success")
            steps, tokens = await _running_counts(page)
            summary = json.loads((out / EPISODE / "summary.json").read_text())
            assert steps == summary["n_steps"] == NOOPS + 1
            assert tokens == sum(v for k, v in summary["tokens"].items() if k != "llm_calls")
            assert bench.wait(timeout=120) == 0
        finally:
            if view is not None:
                view.terminate()
                view.wait(timeout=30)
            if bench.poll() is None:
                bench.kill()
            bench.communicate()
