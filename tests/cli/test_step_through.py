"""``linewise run --headed --step`` driven in a real terminal (tmux) with a headed
Chromium under Xvfb, a local page and the scripted model: every decision at the prompt
lands in the trace, and the box drawn around the target never reaches an observation."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from playwright.sync_api import sync_playwright

from linewise.cli.step_prompt import TerminalOperator, view_summary
from linewise.runtime.debug.overlay import OVERLAY_COLOR, OVERLAY_HOST_ATTRIBUTE
from linewise.runtime.debug.stepper import PendingStep
from linewise.testing import ScriptedChatServer, StaticServer
from tests.support.terminal import (
    devtools_port_under,
    linewise_in_pane,
    needs_terminal,
    xvfb_display,
)

PAGE = """<!doctype html><html><head><title>Counter</title></head><body>
<h1>Counter</h1>
<label>Name <input id="name"></label>
<button id="apply" onclick="applied()">Apply</button>
<button id="reset" onclick="count.textContent = 'Reset done'">Reset</button>
<p id="count">Applied 0 times</p>
<script>
let n = 0;
function applied() { n += 1; count.textContent = 'Applied ' + n + ' times'; }
</script>
</body></html>
"""


def bid_of(prompt: str, element: str) -> str:
    for line in prompt.splitlines():
        if element in line:
            return line.split("[", 1)[1].split("]", 1)[0]
    raise AssertionError(f"{element} not in the prompt")


def click_apply(messages: list[dict[str, Any]]) -> str:
    bid = bid_of(messages[1]["content"].split("# History")[0], "button 'Apply'")
    return f"<think>Press Apply.</think><action>click('{bid}')</action>"


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    with xvfb_display() as name:
        yield name


@pytest.fixture()
def site(tmp_path: Path) -> Iterator[StaticServer]:
    root = tmp_path / "site"
    root.mkdir()
    (root / "counter.html").write_text(PAGE)
    with StaticServer(root) as server:
        yield server


def run_args(llm: ScriptedChatServer, site: StaticServer, out: Path, *extra: str) -> list[str]:
    return ["run", "--url", site.url("counter.html"), "--goal", "Apply twice",
            "--max-steps", "8", "--base-url", llm.base_url, "--model", "scripted",
            "--out", str(out), "--repeat-escapes", "0", "--headed", *extra]


def read_trace(out: Path) -> tuple[list[dict[str, Any]], dict[str, Any], Path]:
    (folder,) = [p.parent for p in out.rglob("steps.jsonl")]
    steps = [json.loads(line) for line in (folder / "steps.jsonl").read_text().splitlines()]
    return steps, json.loads((folder / "summary.json").read_text()), folder


def has_overlay_color(png: bytes) -> bool:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return any(color == OVERLAY_COLOR for _, color in image.getcolors(1 << 24) or [])


def assert_overlay_never_recorded(steps: list[dict[str, Any]], folder: Path) -> None:
    """No line of any tree or view, and no saved screenshot, shows the box."""
    for step in steps:
        for text in (step["axtree"], step["observation"]):
            assert "click(" not in text and "linewise" not in text.lower(), step["index"]
    shots = sorted((folder / "screenshots").glob("*.png"))
    assert len(shots) >= len(steps)
    for shot in shots:
        assert not has_overlay_color(shot.read_bytes()), shot.name


@pytest.mark.slow
@needs_terminal
def test_every_decision_at_the_prompt_is_recorded(
    display: str, site: StaticServer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with ScriptedChatServer(click_apply) as llm, linewise_in_pane(
        run_args(llm, site, out, "--step"), tmp_path, display
    ) as pane:
        text = pane.wait_for(r"step> ")
        assert "=== step 0 · Counter" in text and "thought: Press Apply." in text
        assert re.search(r"action:  click\('\d+'\)", text)
        assert re.search(r"target:  \[\d+\] button 'Apply' \(line \d+ of the tree, shown to "
                         r"the model, boxed in the browser\)", text), text
        assert "--- step 0: waiting for the model's answer" in text
        assert "goal:    Apply twice" in text
        assert re.search(r"view:    the model saw all (\d+) lines of the tree \(filter: auto\)",
                         text), text
        # While the prompt waits, the box is on the page, in the overlay's colour; the
        # page's own tree (read over DevTools as a person's tools would) does not have it.
        with sync_playwright() as playwright:
            chromium = playwright.chromium.connect_over_cdp(
                f"http://127.0.0.1:{devtools_port_under(pane.pid())}")
            page = next(p for c in chromium.contexts for p in c.pages if "counter" in p.url)
            assert has_overlay_color(page.screenshot())
            assert "click(" not in (page.accessibility.snapshot() or {}).__repr__()

            pane.type_line("t")
            text = pane.wait_for(r"--- full tree")
            reset = bid_of(text.split("--- full tree")[-1], "button 'Reset'")
            name = bid_of(text.split("--- full tree")[-1], "textbox 'Name'")
            pane.type_line("v")
            pane.wait_for(r"--- what the model saw")
            pane.type_line("click(")  # not an action: refused with the parser's message
            pane.wait_for(r"Not run: ")
            pane.type_line(f"o click('{reset}')")
            pane.wait_for(r"=== step 1 ")
            pane.send("Enter")  # approve: Apply
            pane.wait_for(r"=== step 2 ")
            pane.type_line("s")
            pane.wait_for(r"=== step 3 ")
            pane.type_line("m")
            pane.wait_for(r"manual> ")
            page.fill("#name", "typed by hand")  # the person's work in the browser
            pane.send("Enter")
            pane.wait_for(r"=== step 4 ")
        pane.type_line("q")
        assert pane.wait_exit() == 130
    steps, summary, folder = read_trace(out)
    assert [s["operator"] for s in steps] == [
        "overridden", "approved", "skipped", "manual", "stopped"]
    apply = steps[0]["model_action"]
    assert apply.startswith("click(") and steps[0]["action"] == f"click('{reset}')"
    assert steps[1]["model_action"] is None and steps[1]["action"] == apply
    assert "Reset done" in steps[1]["axtree"]
    # The model is told what ran, not what it proposed.
    history = steps[1]["llm_calls"][-1]["messages"][1]["content"].split("# History")[1]
    assert f"action: click('{reset}')" in history and apply not in history
    assert "Applied 1 times" in steps[2]["axtree"]
    assert steps[2]["action"] is None and steps[2]["model_action"] == apply
    assert "Applied 1 times" in steps[3]["axtree"]  # the skipped click never ran
    manual = steps[3]["manual"]
    assert steps[3]["action"] is None and manual["before"]["url"] == manual["after"]["url"]
    assert (folder / manual["after"]["screenshot"]).is_file()
    assert any(f"[{name}] textbox 'Name'" in line and "typed by hand" in line
               for line in steps[4]["axtree"].splitlines())
    assert steps[4]["action"] is None and steps[4]["model_action"] == apply
    assert summary["status"] == "stopped" and summary["termination"] == "user_stopped"
    assert_overlay_never_recorded(steps, folder)


@pytest.mark.slow
@needs_terminal
def test_ctrl_c_in_a_headed_run_pauses_then_stops(
    display: str, site: StaticServer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with ScriptedChatServer(click_apply, delay_s=0.3) as llm, linewise_in_pane(
        run_args(llm, site, out, "--max-steps", "40", "--highlight", "50"), tmp_path, display
    ) as pane:
        pane.wait_for(r'"step"|step=', 2)
        pane.send("C-c")
        pane.wait_for(r"pausing before the next action")
        pane.wait_for(r"step> ")
        pane.send("Enter")
        pane.wait_for(r"step> ", 2)
        pane.send("C-c")
        assert pane.wait_exit() == 130
        assert "Traceback" not in pane.text()
    steps, summary, folder = read_trace(out)
    operators = [s["operator"] for s in steps]
    asked = operators.index("approved")
    assert asked >= 1 and set(operators[:asked]) == {None}
    assert operators[asked:] == ["approved", "stopped"]
    assert summary["status"] == "stopped" and summary["termination"] == "user_stopped"
    assert summary["n_steps"] == len(steps)
    assert_overlay_never_recorded(steps, folder)


@pytest.mark.slow
@needs_terminal
def test_ctrl_c_while_the_highlight_box_is_shown_pauses_before_that_action(
    display: str, site: StaticServer, tmp_path: Path
) -> None:
    """The boxed action is the one a person sees coming: Ctrl+C while the box is shown
    must stop it, not let it run and pause before the one after."""
    out = tmp_path / "out"
    with ScriptedChatServer(click_apply) as llm, linewise_in_pane(
        run_args(llm, site, out, "--highlight", "600000"), tmp_path, display
    ) as pane:
        pane.wait_for(r"episode started")
        with sync_playwright() as playwright:
            chromium = playwright.chromium.connect_over_cdp(
                f"http://127.0.0.1:{devtools_port_under(pane.pid())}")
            page = next(p for c in chromium.contexts for p in c.pages if "counter" in p.url)
            page.wait_for_selector(f"[{OVERLAY_HOST_ATTRIBUTE}]", state="attached",
                                   timeout=60_000)
            pane.send("C-c")
            text = pane.wait_for(r"step> ")
            assert "pausing before the next action" in text
            assert "=== step 0 " in text and re.search(r"action:  click\('\d+'\)", text)
            assert page.inner_text("#count") == "Applied 0 times"
        pane.type_line("q")
        assert pane.wait_exit() == 130
    steps, summary, folder = read_trace(out)
    assert [s["operator"] for s in steps] == ["stopped"]
    assert steps[0]["action"] is None and steps[0]["model_action"].startswith("click(")
    assert "Applied 0 times" in steps[0]["axtree"]
    assert summary["termination"] == "user_stopped"
    assert_overlay_never_recorded(steps, folder)


@pytest.mark.slow
@needs_terminal
def test_ctrl_c_in_a_terminal_stops_a_headless_run_after_its_step(
    site: StaticServer, tmp_path: Path
) -> None:
    """The terminal sends SIGINT to every process of the command, Playwright's driver
    too: Chromium must survive it so that the run can stop cleanly."""
    out = tmp_path / "out"
    with ScriptedChatServer(click_apply, delay_s=0.3) as llm:
        args = [a for a in run_args(llm, site, out, "--max-steps", "40") if a != "--headed"]
        with linewise_in_pane(args, tmp_path, None) as pane:
            pane.wait_for(r"step=", 2)
            pane.send("C-c")
            assert pane.wait_exit() == 130
            assert "stopping after the current step" in pane.text()
    steps, summary, _ = read_trace(out)
    assert summary["status"] == "stopped" and summary["termination"] == "interrupted"
    assert summary["n_steps"] == len(steps) >= 2
    assert all(s["failure"] is None and s["operator"] is None for s in steps)


def apply_then_report(messages: list[dict[str, Any]]) -> str:
    if "Applied 1 times" in messages[1]["content"].split("# History")[0]:
        return "<think>Done.</think><action>send_msg_to_user('Applied once')</action>"
    return click_apply(messages)


@pytest.mark.slow
@needs_terminal
def test_a_headless_step_through_says_what_to_do_instead_of_m_and_labels_the_help(
    site: StaticServer, tmp_path: Path
) -> None:
    """Headless, there is no window to work in: ``m`` says so and what the person can
    do; an ad-hoc run a person assisted is "assisted", with no success check to fail."""
    out = tmp_path / "out"
    with ScriptedChatServer(apply_then_report) as llm:
        args = [a for a in run_args(llm, site, out, "--step") if a != "--headed"]
        with linewise_in_pane(args, tmp_path, None) as pane:
            text = pane.wait_for(r"step> ")
            assert "m take over" not in text  # not offered where it cannot work
            assert re.search(r"target:  \[\d+\] button 'Apply' \(line \d+ of the tree, "
                             r"shown to the model\)\n", text), text  # no box to see
            pane.type_line("m")
            text = pane.wait_for(r"step> ", 2)
            assert "work in the browser window" not in text and "manual> " not in text
            assert ("m: this run is headless, there is no browser window to work in. "
                    "Type the action to run instead (o ACTION; t shows the tree with the "
                    "elements' ids), s to skip the step, or run again with --headed to "
                    "work in the page by hand.") in text, text
            pane.type_line("s")  # the person decides this step: the run is assisted
            pane.wait_for(r"=== step 1 ")
            pane.send("Enter")
            pane.wait_for(r"=== step 2 ")
            pane.send("Enter")
            assert pane.wait_exit() == 0
            text = pane.text()
    assert re.search(r"^adhoc +assisted \(no success check\) +0\.00 +3 ", text,
                     re.MULTILINE), text
    assert "a person decided 1 of 3 steps" in text
    assert "task not done" not in text and "0/0" not in text
    assert ("No success check: the task has none, so nothing was judged (a person "
            "decided 1 of its 3 steps); what the agent said is below.") in text
    assert "Answer (adhoc): Applied once" in text
    steps, summary, _ = read_trace(out)
    assert [s["operator"] for s in steps] == ["skipped", "approved", "approved"]
    assert summary["outcome"] == "assisted" and summary["success"] is None


@pytest.mark.slow
def test_step_without_a_terminal_fails_at_once(tmp_path: Path) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "linewise.cli.main", "run", "--url", "http://127.0.0.1:9/",
         "--goal", "x", "--step", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
         "--out", str(tmp_path / "out")],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert process.returncode == 2, process.stderr
    assert "--step needs a terminal" in process.stderr
    assert not (tmp_path / "out").exists()


def test_the_view_line_says_what_the_model_saw_and_by_which_filter() -> None:
    pending = PendingStep(
        index=3, goal="g", url="u", title="t", think=None, action=None, action_text=None,
        parse_error=None, target=None, kept_lines=2, total_lines=2, filter="none",
        full_tree="", filtered_view="")
    assert view_summary(pending) == "the model saw all 2 lines of the tree (filter: none)"
    cut = dataclasses.replace(pending, kept_lines=12, total_lines=340, filter="focus")
    assert view_summary(cut) == "the model saw 12 of the tree's 340 lines (filter: focus)"
    out = io.StringIO()
    TerminalOperator(stdin=io.StringIO(), out=out).waiting(3)
    assert out.getvalue().startswith("--- step 3: waiting for the model's answer")
