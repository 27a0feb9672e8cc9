"""The ``linewise`` command as a user runs it: a real process, real files, real endpoints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from linewise.testing import ScriptedChatServer, StaticServer

DATA = Path(__file__).parent / "data"


def linewise(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> (
    subprocess.CompletedProcess[str]
):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    return subprocess.run(
        [sys.executable, "-m", "linewise.cli.main", *args],
        capture_output=True, text=True, timeout=timeout, env={**clean, **(env or {})},
    )


def page_two_script(messages: list[dict[str, Any]]) -> str:
    prompt = messages[1]["content"]
    if "Page two" in prompt.split("# History")[0] and "Go to page two" not in prompt:
        return "<think>Arrived.</think><action>send_msg_to_user('page two reached')</action>"
    for line in prompt.splitlines():
        if "link 'Go to page two'" in line:
            bid = line.split("[", 1)[1].split("]", 1)[0]
            return f"<think>Follow the link.</think><action>click('{bid}')</action>"
    return "<action>noop()</action>"


def test_adhoc_run_writes_the_trace_layout(pages: StaticServer, tmp_path: Path) -> None:
    with ScriptedChatServer(page_two_script) as llm:
        result = linewise(
            "run", "--url", pages.url("form.html"), "--goal", "Open page two",
            "--base-url", llm.base_url, "--model", "scripted", "--out", str(tmp_path / "run"),
            "--log-json",
        )
    assert result.returncode == 0, result.stderr
    run = tmp_path / "run"
    assert json.loads((run / "run.json").read_text())["settings"]["action"]["model"] == "scripted"
    [episode] = [p for p in run.iterdir() if p.is_dir()]
    summary = json.loads((episode / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["n_steps"] == 2
    assert summary["termination"] == "agent_done" and summary["answer"] == "page two reached"
    assert len((episode / "steps.jsonl").read_text().splitlines()) == 2
    assert sorted(p.name for p in (episode / "screenshots").iterdir()) == [
        "step-000.png", "step-001.png"]
    # --log-json: every stderr line is a JSON object
    events = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    assert any(e.get("event") == "episode finished" for e in events)
    assert "0/1 succeeded" in result.stdout


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("unknown_key.yaml", ["unknown_key.yaml", "tasks[", "unknown key"]),
        ("missing_goal.yaml", ["missing_goal.yaml", "goal"]),
    ],
)
def test_broken_task_file_names_file_and_field(name: str, expected: list[str]) -> None:
    path = DATA / "tasks" / name
    assert path.exists(), sorted(p.name for p in path.parent.iterdir())
    result = linewise("run", str(path), timeout=60)
    assert result.returncode == 2
    for fragment in expected:
        assert fragment in result.stderr, result.stderr


def test_run_refuses_browsergym_tasks_and_names_them(tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(
        "tasks:\n  - {miniwob: click-test, seed: 1}\n  - browsergym: webarena.310\n"
    )
    result = linewise("run", str(path), timeout=60)
    assert result.returncode == 2
    assert f"{path}: tasks[1] (id 'browsergym.webarena.310.seed0')" in result.stderr
    assert "only 'linewise bench' can run" in result.stderr


def test_unreachable_endpoint_names_the_url(pages: StaticServer, tmp_path: Path) -> None:
    result = linewise(
        "run", "--url", pages.url("form.html"), "--goal", "x",
        "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path),
        timeout=60,
    )
    assert result.returncode == 3
    assert "http://127.0.0.1:9/v1" in result.stderr and "unreachable" in result.stderr


def test_openai_environment_variables_are_honoured(pages: StaticServer, tmp_path: Path) -> None:
    with ScriptedChatServer(page_two_script, model="env-model") as llm:
        result = linewise(
            "run", "--url", pages.url("form.html"), "--goal", "Open page two",
            "--out", str(tmp_path), "--no-screenshots",
            env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-test",
                 "LINEWISE_ACTION__MODEL": "env-model"},
        )
        assert result.returncode == 0, result.stderr
        assert llm.requests and llm.requests[0]["model"] == "env-model"
    assert "sk-test" not in (tmp_path / "run.json").read_text()


def test_usage_errors() -> None:
    assert linewise("run", timeout=30).returncode == 2
    result = linewise("run", "--url", "http://x", timeout=30)
    assert result.returncode == 2 and "--goal" in result.stderr


@pytest.fixture(scope="module")
def xvfb_display() -> Iterator[str]:
    binary = shutil.which("Xvfb")
    if binary is None:
        pytest.fail("Xvfb is not installed: run `linewise setup --xvfb`")
    display = f":{90 + os.getpid() % 100}"
    process = subprocess.Popen([binary, display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    assert process.poll() is None, "Xvfb did not start"
    yield display
    process.terminate()
    process.wait(timeout=10)


@pytest.mark.headed
def test_headed_run_under_xvfb(pages: StaticServer, tmp_path: Path, xvfb_display: str) -> None:
    seen_agents: list[str] = []

    def script(messages: list[dict[str, Any]]) -> str:
        seen_agents.append(messages[1]["content"])
        return page_two_script(messages)

    with ScriptedChatServer(script) as llm:
        result = linewise(
            "run", "--headed", "--url", pages.url("form.html"), "--goal", "Open page two",
            "--base-url", llm.base_url, "--model", "scripted", "--out", str(tmp_path),
            env={"DISPLAY": xvfb_display},
        )
    assert result.returncode == 0, result.stderr
    assert "headless=False" in result.stderr or '"headless": false' in result.stderr
    [episode] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((episode / "summary.json").read_text())["answer"] == "page two reached"


@pytest.mark.headed
async def test_headed_browser_is_really_headed(
    xvfb_display: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from linewise.runtime.browser.chromium import Browser, BrowserConfig

    monkeypatch.setenv("DISPLAY", xvfb_display)
    async with Browser(BrowserConfig(headless=False)) as headed:
        session = await headed.new_session()
        agent = await session.page.evaluate("navigator.userAgent")
        await session.close()
    assert "Chrome/" in agent and "Headless" not in agent


def test_a_kill_loses_at_most_the_step_in_flight(pages: StaticServer, tmp_path: Path) -> None:
    """SIGKILL mid-run: every finished step is on disk and the summary says 'running'."""
    import signal

    def slow_script(messages: list[dict[str, Any]]) -> str:
        return "<think>Wait.</think><action>noop(10)</action>"

    with ScriptedChatServer(slow_script, delay_s=0.4) as llm:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
        process = subprocess.Popen(
            [sys.executable, "-m", "linewise.cli.main", "run", "--url", pages.url("form.html"),
             "--goal", "Wait forever", "--max-steps", "50", "--base-url", llm.base_url,
             "--model", "scripted", "--out", str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean,
        )
        deadline = time.monotonic() + 90
        steps_file: Path | None = None
        while time.monotonic() < deadline:
            found = list(tmp_path.glob("*/steps.jsonl"))
            if found and len(found[0].read_text().splitlines()) >= 3:
                steps_file = found[0]
                break
            time.sleep(0.1)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert steps_file is not None, "the run never wrote three steps"
    lines = steps_file.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line is complete JSON
    assert [r["index"] for r in records] == list(range(len(records)))
    assert all(r["action"] == "noop(10.0)" for r in records)
    summary = json.loads((steps_file.parent / "summary.json").read_text())
    assert summary["status"] == "running" and summary["goal"] == "Wait forever"
