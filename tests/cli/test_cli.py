"""The ``linewise`` command as a user runs it: a real process, real files, real endpoints."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from linewise.agent.filters.registry import FilterContext, register_filter, unregister_filter
from linewise.cli.flags import SETTINGS_FLAGS, settings_from_args
from linewise.cli.main import build_parser, main
from linewise.errors import ConfigError
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.log import configure_logging
from linewise.settings import LinewiseSettings
from linewise.testing import ScriptedChatServer, StaticServer, miniwob_solver
from tests.support.cli import linewise, page_two_script
from tests.support.paths import DATA


@pytest.mark.slow
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
    # an ad-hoc question has no success check: said so, and the answer is printed
    assert "0/0 succeeded" not in result.stdout
    assert "No success check" in result.stdout
    assert "Answer (adhoc): page two reached" in result.stdout


@pytest.mark.slow
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


@pytest.mark.slow
def test_run_takes_browsergym_tasks_through_the_same_loop(tmp_path: Path) -> None:
    pytest.importorskip("browsergym.miniwob", reason="pip install browsergym-miniwob")
    path = tmp_path / "mixed.yaml"
    path.write_text(
        "tasks:\n  - {miniwob: click-test, seed: 1, max_steps: 2}\n"
        "  - {browsergym: miniwob.click-test, seed: 1, max_steps: 2}\n"
    )
    out = tmp_path / "run"
    with ScriptedChatServer(miniwob_solver) as llm:
        result = linewise("run", str(path), "--base-url", llm.base_url, "--model", "m",
                          "--out", str(out), "--no-screenshots", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "2/2 succeeded" in result.stdout
    native = (out / "miniwob.click-test.seed1" / "steps.jsonl").read_text().splitlines()
    gym = (out / "browsergym.miniwob.click-test.seed1" / "steps.jsonl").read_text().splitlines()
    # one flattening: the same page, element ids aside
    assert json.loads(native[0])["axtree_lines"] == json.loads(gym[0])["axtree_lines"]


@pytest.mark.slow
def test_run_names_the_servers_a_browsergym_family_needs(tmp_path: Path) -> None:
    path = tmp_path / "webarena.yaml"
    path.write_text("tasks:\n  - browsergym: webarena.310\n")
    result = linewise("run", str(path), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                      timeout=60)
    assert result.returncode == 2
    assert "browsergym-webarena" in result.stderr or "WA_SHOPPING" in result.stderr


@pytest.mark.slow
def test_unreachable_endpoint_names_the_url(pages: StaticServer, tmp_path: Path) -> None:
    result = linewise(
        "run", "--url", pages.url("form.html"), "--goal", "x",
        "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path),
        timeout=60,
    )
    assert result.returncode == 3
    assert "http://127.0.0.1:9/v1" in result.stderr and "unreachable" in result.stderr


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# Settings: flags are overrides of the settings model, one table for all subcommands.


def test_every_flag_in_the_table_names_a_real_setting() -> None:
    for dest, paths in SETTINGS_FLAGS.items():
        for path in paths:
            model: Any = LinewiseSettings
            for part in path:
                fields = model.model_fields
                assert part in fields, (dest, path)
                model = fields[part].annotation
    flags_of = {a.dest for p in _subparsers(build_parser()).values() for a in p._actions}
    assert set(SETTINGS_FLAGS) <= flags_of  # no row without a flag


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_flags_override_the_environment_and_absent_flags_keep_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "LINEWISE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LINEWISE_ACTION__MAX_IN_FLIGHT", "9")
    monkeypatch.setenv("LINEWISE_PARSE_RETRIES", "5")  # the short name of agent.parse_retries
    monkeypatch.setenv("LINEWISE_REPEAT_ESCAPES", "4")
    monkeypatch.setenv("LINEWISE_AGENT__REPEAT_ESCAPES", "3")  # the nested name wins
    monkeypatch.setenv("LINEWISE_HEADLESS", "true")
    args = build_parser().parse_args([
        "bench", "tasks.yaml", "--base-url", "http://127.0.0.1:1/v1", "--model", "m",
        "--rps", "2.5", "--headed", "--slow-mo", "7", "--no-cost-gate", "--no-screenshots",
        "--episode-timeout", "30",
    ])
    settings = settings_from_args(args)
    assert settings.action.max_in_flight == 9 and settings.retriever.max_in_flight == 4
    assert settings.action.requests_per_second == settings.retriever.requests_per_second == 2.5
    assert settings.agent.parse_retries == 5 and settings.agent.repeat_escapes == 3
    assert settings.browser.headless is False and settings.browser.slow_mo_ms == 7
    assert settings.filter.cost_gate is False and settings.screenshots is False
    assert settings.episode_timeout_s == 30 and settings.retriever.model == "m"
    config = BrowserConfig.from_settings(settings.browser)
    assert config.headless is False and config.slow_mo_ms == 7
    # filter-eval has none of the browser flags: they count as not given
    evaluate = settings_from_args(build_parser().parse_args(["filter-eval", "cases"]))
    assert evaluate.browser.headless is True and evaluate.filter.cost_gate is False
    with pytest.raises(ValidationError):
        settings.agent.parse_retries = 1  # type: ignore[misc]


def test_an_invalid_flag_value_names_the_flag() -> None:
    args = build_parser().parse_args(["bench", "t.yaml", "--max-in-flight", "0"])
    with pytest.raises(ConfigError, match="--max-in-flight"):
        settings_from_args(args)
    result = linewise("run", "--url", "http://x", "--goal", "g", "--filter", "nope", timeout=30)
    assert result.returncode == 2
    assert "unknown filter 'nope'" in result.stderr and "lines+structure" in result.stderr


# A filter of one's own, selected with --filter NAME: registered in code, and offered by an
# installed package through the linewise.filters entry-point group.

LINKS_FILTER = '''
from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.tokens import count_tokens


class LinksOnly:
    """The page's first line and its links."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def apply(self, observation: FilterInput) -> FilterResult:
        kept = [n for n, line in enumerate(observation.lines, 1) if n == 1 or " link " in line]
        text = "\\n".join(observation.lines[n - 1] for n in kept)
        return FilterResult(name=self.name, text=text, kept_lines=kept,
                            tokens_full=count_tokens(observation.text),
                            tokens_shown=count_tokens(text))


def make_filter(context):
    return LinksOnly("links-plugin")
'''


def _links_only_module(tmp_path: Path) -> types.ModuleType:
    module = types.ModuleType("links_only_in_test")
    exec(compile(LINKS_FILTER, "links_only_in_test", "exec"), module.__dict__)
    return module


def _case_file(tmp_path: Path) -> Path:
    lines = ["[1] RootWebArea 'Shop'", "\t[2] button 'Buy'", "\t[3] link 'Help'",
             "\t[4] StaticText 'Prices'"]
    path = tmp_path / "case.json"
    path.write_text(json.dumps({"id": "shop", "goal": "Get help", "lines": lines,
                                "gold_bids": ["3"]}))
    return path


def _assert_links_only_run(run_dir: Path, name: str, requests: list[dict[str, Any]]) -> None:
    [episode] = [p for p in run_dir.iterdir() if p.is_dir()]
    summary = json.loads((episode / "summary.json").read_text())
    assert summary["filter"] == name and summary["answer"] == "page two reached"
    steps = [json.loads(line) for line in (episode / "steps.jsonl").read_text().splitlines()]
    assert [s["filter"] for s in steps] == [name, name]
    assert steps[0]["filter_result"]["kept_lines"] < steps[0]["filter_result"]["total_lines"]
    first_prompt = requests[0]["messages"][1]["content"]
    assert "link 'Go to page two'" in first_prompt and "button 'Submit'" not in first_prompt


@pytest.mark.slow
def test_a_filter_registered_in_code_runs_in_filter_eval_and_run(
    pages: StaticServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "LINEWISE_")):
            monkeypatch.delenv(name)
    module = _links_only_module(tmp_path)

    @register_filter("links-in-test")
    def make(context: FilterContext) -> Any:
        return module.LinksOnly("links-in-test")

    try:
        assert main(["filter-eval", str(_case_file(tmp_path)), "--filter", "links-in-test",
                     "--filter", "none"]) == 0
        table = capsys.readouterr().out
        [row] = [line for line in table.splitlines() if line.startswith("links-in-test")]
        assert "100" in row  # the gold link was kept: recall 100 %
        with ScriptedChatServer(page_two_script) as llm:
            code = main(["run", "--url", pages.url("form.html"), "--goal", "Open page two",
                         "--base-url", llm.base_url, "--model", "scripted", "--no-screenshots",
                         "--filter", "links-in-test", "--out", str(tmp_path / "run")])
            requests = llm.requests
        assert code == 0
        _assert_links_only_run(tmp_path / "run", "links-in-test", requests)
    finally:
        unregister_filter("links-in-test")
        configure_logging(json_lines=False, level="WARNING")


@pytest.mark.slow
def test_a_filter_from_an_entry_point_runs_in_filter_eval_and_run(
    pages: StaticServer, tmp_path: Path,
) -> None:
    plugin = tmp_path / "plugin"
    (plugin / "linewise_links_plugin-0.1.dist-info").mkdir(parents=True)
    (plugin / "linewise_links_plugin.py").write_text(LINKS_FILTER)
    info = plugin / "linewise_links_plugin-0.1.dist-info"
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: linewise-links-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[linewise.filters]\nlinks-plugin = linewise_links_plugin:make_filter\n")
    path = os.pathsep.join(p for p in (str(plugin), os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONPATH": path}

    evaluated = linewise("filter-eval", str(_case_file(tmp_path)), "--filter", "links-plugin",
                         env=env, timeout=120)
    assert evaluated.returncode == 0, evaluated.stderr
    assert any(line.startswith("links-plugin") for line in evaluated.stdout.splitlines())
    with ScriptedChatServer(page_two_script) as llm:
        ran = linewise("run", "--url", pages.url("form.html"), "--goal", "Open page two",
                       "--base-url", llm.base_url, "--model", "scripted", "--no-screenshots",
                       "--filter", "links-plugin", "--out", str(tmp_path / "run"), env=env)
        requests = llm.requests
    assert ran.returncode == 0, ran.stderr
    _assert_links_only_run(tmp_path / "run", "links-plugin", requests)
