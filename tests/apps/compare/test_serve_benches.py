"""``linewise view A B --serve``: one index over several benches, served live.

Two real ``linewise bench`` runs on MiniWoB++ (the scripted model behind real HTTP): "done"
has ended, "running" is slowed down so that its episode runs while it is served; a real
``linewise view done running --serve`` process, its pages rendered in headless Chromium
and every link followed over HTTP.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from linewise.runtime.browser.chromium import BrowserSession
from linewise.testing import ScriptedChatServer, miniwob_solver
from tests.apps.viewer.test_viewer_live import (
    EPISODE,
    LINEWISE,
    NOOPS,
    TASKS,
    _env,
    _wait_for,
    dawdler,
)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def _bench(tasks: Path, out: Path, base_url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*LINEWISE, "bench", str(tasks), "--filter", "none", "--concurrency", "1",
         "--out", str(out), "--base-url", base_url, "--model", "scripted", "--log-json"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
async def test_serve_follows_several_benches_in_one_index(
    tmp_path: Path, session: BrowserSession,
) -> None:
    """Before: `linewise view A B --serve` was refused ("--serve follows one episode,
    run or bench folder: serve each bench on its own")."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    done, running = tmp_path / "done", tmp_path / "running"
    with ScriptedChatServer(miniwob_solver) as llm:
        finished = _bench(tasks, done, llm.base_url)
        _, err = finished.communicate(timeout=300)
        assert finished.returncode == 0, err[-3000:]

    with ScriptedChatServer(dawdler, delay_s=1.5) as llm:
        bench = _bench(tasks, running, llm.base_url)
        view = None
        try:
            _wait_for(lambda: (running / EPISODE / "summary.json").exists(),
                      "the episode to start")
            view = subprocess.Popen([*LINEWISE, "view", str(done), str(running), "--serve",
                                     "--port", "0"], cwd=tmp_path, env=_env(),
                                    stdout=subprocess.PIPE, text=True)
            assert view.stdout is not None
            first = view.stdout.readline()
            assert first.startswith("serving "), first  # no --out: no index is written
            url = first.split()[1]
            assert url.endswith("/view/index.html")
            assert not (tmp_path / "view").exists()
            assert (done / "view" / "index.html").is_file()  # each bench's own viewer

            page = session.page
            await page.set_viewport_size({"width": 1400, "height": 900})
            await page.goto(url)
            await page.wait_for_selector("#benches tbody tr")
            labels = await page.eval_on_selector_all(
                "#benches tbody tr", "trs => trs.map(tr => tr.dataset.bench)")
            assert labels == ["done", "running"]
            await page.wait_for_function("""() => [...document.querySelectorAll(
                '#episodes tbody tr.running')].length === 1""")
            await page.evaluate("window.notReloaded = true")
            # the running bench's row counts its steps as they are written
            await page.wait_for_function("""() => {
                const tr = document.querySelector('#episodes tbody tr.running');
                return tr && Number(tr.cells[7].textContent) >= 2;
            }""", timeout=60_000)
            assert await page.evaluate("window.notReloaded") is True
            rows = await page.eval_on_selector_all(
                "#episodes tbody tr", "trs => trs.map(tr => [tr.cells[0].textContent, "
                "tr.className])")
            assert sorted(rows) == [["done", "success"], ["running", "running"]], rows
            await page.screenshot(path=str(tmp_path / "served-benches.png"), full_page=True)

            # every link of the index is served, below the token; no report link (the
            # server does not hand reports out)
            hrefs = await page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)")
            assert hrefs and all(h.startswith(url.removesuffix("view/index.html"))
                                 for h in hrefs), hrefs
            assert not [h for h in hrefs if h.endswith("report.html")], hrefs
            for href in hrefs:
                assert _status(href) == 200, href
            live_url = url.replace("index.html", "data/live.json")
            with urllib.request.urlopen(live_url, timeout=10) as answer:
                live = json.loads(answer.read())
            assert live["running"] is True and len(live["episodes"]) == 2
            # only the viewer's files of each bench, only under the token
            base = url.removesuffix("view/index.html")
            for path in ("bench/1/bench.json", "bench/1/results.jsonl",
                         f"bench/1/{EPISODE}/steps.jsonl", "bench/2/view/index.html",
                         "bench/0/../running/view/index.html"):
                assert _status(base + path) == 404, path
            token = base.rstrip("/").rsplit("/", 1)[1]
            assert _status(url.replace(token, "x" * len(token))) == 404

            # the running episode's page, in its bench's own viewer, follows it
            await page.click("#episodes tbody tr.running a")
            await page.wait_for_selector("body[data-shown]")
            assert "/bench/1/view/episodes/" in page.url
            await page.wait_for_selector("#outcome.ok", timeout=120_000)
            ended = await page.text_content("#counts") or ""
            assert ended.startswith(f"{NOOPS + 1} steps · "), ended

            # back on the index: the ended episode and its bench's numbers, loaded again
            await page.go_back()
            await page.wait_for_function("""() => [...document.querySelectorAll(
                '#episodes tbody tr.success')].length === 2""", timeout=60_000)
            assert bench.wait(timeout=120) == 0
            await page.wait_for_function("""() => document.querySelector(
                '#benches tr[data-bench="running"]').cells[3].textContent === '1'""",
                timeout=60_000)
        finally:
            if view is not None:
                view.terminate()
                view.wait(timeout=30)
            if bench.poll() is None:
                bench.kill()
            bench.communicate()


def test_several_benches_need_out_or_serve(tmp_path: Path) -> None:
    from tests.support.cli import linewise

    refused = linewise("view", str(tmp_path / "a"), str(tmp_path / "b"))
    assert refused.returncode == 2
    assert "give --out DIR" in refused.stderr and "or --serve" in refused.stderr
