"""Stepping through a BrowserGym task: the same debugger as in linewise's own browser.

BrowserGym's gym env is sync Playwright on a worker thread and reads the page only inside
its own ``step``; the box must still be drawn in its page while the person decides and be
gone from what ``step`` records, a person's work by hand must be seen by the next step,
the acted-on element's box is recorded for the viewer, and ``--playwright-trace`` records
one chunk per step there too. A person at the prompt is played by ``ScriptedOperator``.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import Page

from linewise.agent.action_parser import parse_action
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.debug.overlay import OVERLAY_COLOR
from linewise.runtime.debug.stepper import Choice, ChoiceKind, PendingStep, StepThroughHooks
from linewise.runtime.envs.browsergym import BrowserGymEnv
from linewise.runtime.episode import StepContext, StepHooks
from linewise.runtime.playwright_trace import PlaywrightTraceHooks
from linewise.runtime.tasks.schema import BrowserGymTask
from linewise.runtime.trace import read_steps
from linewise.testing import StaticServer
from linewise.testing.miniwob_solver import bid_matching
from tests.support.episodes import resources_of, run_episode
from tests.support.sites import Step, scripted


def overlay_pixels(png: bytes) -> int:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(n for n, color in image.getcolors(1 << 24) or [] if color == OVERLAY_COLOR)


def _task(pages: StaticServer, max_steps: int) -> BrowserGymTask:
    return BrowserGymTask(
        id="bgym-step", browsergym="openended", max_steps=max_steps,
        task_kwargs={"start_url": pages.url("form.html"), "goal": "Sign up as Alice."},
    )


class EnvProbe(StepHooks):
    """Hands the test the episode's environment (the operator draws nothing itself)."""

    env: BrowserGymEnv | None = None

    async def before_observe(self, step: StepContext) -> None:
        assert isinstance(step.env, BrowserGymEnv)
        self.env = step.env


class ScriptedOperator:
    """Takes ``decide``'s choice at each step; while deciding, screenshots the live page.
    Working by hand, it signs up as Bob in BrowserGym's page."""

    def __init__(self, probe: EnvProbe, decide: Callable[[PendingStep], Choice]) -> None:
        self.probe = probe
        self.decide = decide
        self.seen: list[PendingStep] = []
        self.waited: list[int] = []
        self.live_overlay_pixels: list[int] = []

    def _env(self) -> BrowserGymEnv:
        assert self.probe.env is not None
        return self.probe.env

    async def choose(self, pending: PendingStep) -> Choice:
        self.seen.append(pending)
        live = await self._env().on_page("test", lambda page: page.screenshot(), 10)
        self.live_overlay_pixels.append(overlay_pixels(live))
        return self.decide(pending)

    def waiting(self, index: int) -> None:
        self.waited.append(index)

    async def hand_back(self, pending: PendingStep) -> None:
        def sign_up_by_hand(page: Page) -> None:
            page.fill("#name", "Bob")
            page.click("#submit")

        await self._env().on_page("test", sign_up_by_hand, 10)


def press(name: str) -> Step:
    return lambda tree: f"click('{bid_matching(tree, rf'button .{name}.')}')"


def decide(pending: PendingStep) -> Choice:
    """Approve, then press "Click me" instead of Submit, then sign up by hand, then skip,
    then quit."""
    if pending.index == 1:
        counter = bid_matching(pending.full_tree, r"button 'Click me'")
        return Choice("override", parse_action(f"click('{counter}')"))
    kinds: list[ChoiceKind] = ["run", "override", "manual", "skip", "quit"]
    return Choice(kinds[pending.index])


@pytest.mark.slow
async def test_stepping_through_a_browsergym_task(
    browser: Browser, pages: StaticServer, tmp_path: Path
) -> None:
    model = scripted([
        lambda tree: f"fill('{bid_matching(tree, r'textbox .Name.')}', 'Alice')",
        press("Submit"), press("Submit"), press("Double click me"), "noop()",
    ])
    probe = EnvProbe()
    operator = ScriptedOperator(probe, decide)
    summary = await run_episode(
        _task(pages, 8), resources_of(browser, model), tmp_path,
        hooks=[probe, StepThroughHooks(operator), PlaywrightTraceHooks()],
    )
    folder = tmp_path / "bgym-step"
    steps = read_steps(folder)
    assert summary.status == "stopped" and summary.termination == "user_stopped"
    assert [s.operator for s in steps] == [
        "approved", "overridden", "manual", "skipped", "stopped"]
    assert operator.waited == [0, 1, 2, 3, 4]  # told before every model call
    assert all(pending.goal == summary.goal for pending in operator.seen)

    # The box was in BrowserGym's page while each decision was taken, around the target.
    # (Step 4's noop names no element: nothing is drawn.)
    boxed, unboxed = operator.live_overlay_pixels[:4], operator.live_overlay_pixels[4]
    assert all(n > 0 for n in boxed) and unboxed == 0, operator.live_overlay_pixels
    for pending in operator.seen[:4]:
        assert pending.target is not None and pending.target.box is not None
        assert pending.target.role in ("textbox", "button") and pending.target.shown
    assert operator.seen[4].target is None
    # ... and never in what BrowserGym recorded: trees, views, screenshots.
    for step in steps:
        assert "click(" not in step.axtree and "fill(" not in step.observation
    shots = sorted((folder / "screenshots").glob("*.png"))
    assert len(shots) >= len(steps)
    assert all(overlay_pixels(shot.read_bytes()) == 0 for shot in shots)

    # What ran: the approved fill, then the person's click instead of Submit.
    assert steps[0].target_box is not None and steps[0].target_box.width > 0
    assert steps[1].model_action is not None and "click(" in steps[1].model_action
    assert steps[1].action is not None and steps[1].action != steps[1].model_action
    assert "Clicked 1 times" in steps[2].axtree
    # The person's work by hand is seen by the next step, though BrowserGym did not act.
    manual = steps[2].manual
    assert manual is not None and manual.after.screenshot is not None
    assert (folder / manual.after.screenshot).is_file()
    assert "Submitted Bob" in steps[3].axtree and "Submitted Bob" not in steps[2].axtree
    assert "Submitted Bob" in steps[4].axtree  # the skipped click changed nothing

    # One Playwright trace chunk per step that ran an action, titled with it.
    chunks = {s.index: s.hook_notes.get("playwright_trace") for s in steps}
    assert chunks[0] == "playwright-trace/step-000.zip", chunks
    assert chunks[1] == "playwright-trace/step-001.zip", chunks
    with zipfile.ZipFile(folder / "playwright-trace/step-001.zip") as archive:
        first = json.loads(archive.read("trace.trace").splitlines()[0])
    assert first["title"] == steps[1].action
