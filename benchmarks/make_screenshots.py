"""The documentation's pictures, made again from the current build (docs/viewer.png,
docs/step-through.png), so that they show what linewise shows today.

- ``viewer.png``: ``linewise run`` on MiniWoB++'s enter-text (seed 0, served locally)
  with the truncate filter at a 40-token budget and a scripted model that clicks past
  the Submit button the filter hid (a filter miss), then ``linewise view`` and the
  episode's last step in headless Chromium.
- ``step-through.png``: ``linewise run --step`` on a local counter page, the step
  prompt as ``TerminalOperator`` prints it for a headed run, beside the page while the
  prompt waits, with the target boxed. The page is shot headless: the box is drawn in
  the page itself, so it looks as in the headed window; the prompt is answered with
  Enter once the page is shot.

Everything runs on localhost (no network, no model endpoint: the scripted server):

    python benchmarks/make_screenshots.py [--out docs]

``tests/benchmarks/test_make_screenshots.py`` runs ``make_screenshots`` on a temporary
folder and checks what the pictures show.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import html
import io
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.async_api import async_playwright

from linewise.apps.viewer.paths import episode_page
from linewise.cli.step_prompt import TerminalOperator
from linewise.runtime.browser.chromium import find_chromium
from linewise.runtime.debug.stepper import Choice, PendingStep, StepThroughHooks
from linewise.runtime.episode import StepContext, StepHooks
from linewise.runtime.run import run
from linewise.runtime.tasks.schema import WebTask
from linewise.settings import LinewiseSettings
from linewise.testing import (
    FunctionModel,
    ScriptedChatServer,
    StaticServer,
    miniwob_solver,
    prompt_section,
)

DOCS = Path(__file__).resolve().parent.parent / "docs"

MINIWOB_TASKS = """\
tasks:
  - miniwob: enter-text
    seed: 0
    max_steps: 3
"""

COUNTER_PAGE = """<!doctype html><html><head><title>Counter</title></head><body>
<h1>Counter</h1>
<p>Press Apply to count.</p>
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

PAGE_SHOWN = {"x": 0, "y": 0, "width": 640, "height": 300}
"""The part of the counter page the step-through picture shows (CSS pixels)."""


@dataclass
class Screens:
    """What was written, and what the pictures say (for the test)."""

    viewer: Path
    step_through: Path
    viewer_step_label: str = ""
    """The viewer's step label, e.g. ``step 1 (2 of 2)``: steps count from 0."""
    viewer_timeline: list[str] = field(default_factory=list)
    """The step buttons of the viewer's timeline, as labelled."""
    terminal: str = ""
    """The step prompt's text, as the picture shows it."""


def past_hidden_submit(messages: list[dict[str, Any]]) -> str:
    """``miniwob_solver``, except that when the filter hid the Submit button it clicks
    the element after the field it filled (enter-text's page order): a filter miss."""
    try:
        return miniwob_solver(messages)
    except ValueError:
        history = prompt_section(messages[1]["content"], "History of your previous steps")
        filled = re.search(r"fill\('(\d+)'", history)
        if filled is None:
            raise
        return f"<think>Submit is hidden.</think><action>click('{int(filled[1]) + 1}')</action>"


def click_apply(messages: list[dict[str, Any]], info: object = None) -> str:
    page = messages[1]["content"].split("# History")[0]
    bid = next(line.split("[", 1)[1].split("]", 1)[0] for line in page.splitlines()
               if "button 'Apply'" in line)
    return f"<think>Press Apply.</think><action>click('{bid}')</action>"


def linewise(*args: str) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    result = subprocess.run([sys.executable, "-m", "linewise.cli.main", *args],
                            capture_output=True, text=True, env=clean, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"linewise {args[0]} failed:\n{result.stderr[-3000:]}")


async def viewer_picture(work: Path, out: Path, screens: Screens) -> None:
    (work / "tasks.yaml").write_text(MINIWOB_TASKS)
    run_dir = work / "run"
    with ScriptedChatServer(past_hidden_submit) as llm:
        await asyncio.to_thread(
            linewise, "run", str(work / "tasks.yaml"), "--filter", "truncate",
            "--max-obs-tokens", "40", "--base-url", llm.base_url, "--model", "scripted",
            "--out", str(run_dir))
    await asyncio.to_thread(linewise, "view", str(run_dir))
    (episode,) = [p.parent for p in run_dir.rglob("summary.json")]
    page_path = run_dir / "view" / episode_page(episode.relative_to(run_dir).as_posix())
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=find_chromium())
        page = await browser.new_page(viewport={"width": 1400, "height": 900})
        await page.goto(page_path.as_uri() + "#step=1")
        await page.wait_for_selector("body[data-shown]")
        await page.wait_for_function(
            "() => { const i = document.getElementById('shot-img'); "
            "return i.complete && i.naturalWidth > 0 }")
        # the dropped runs shown, so that the kept, dropped and missed lines all read
        await page.uncheck("#fold")
        await page.wait_for_timeout(200)
        screens.viewer_step_label = await page.inner_text("#step-label")
        screens.viewer_timeline = await page.locator("#timeline button").all_inner_texts()
        await page.screenshot(path=str(out))
        await browser.close()


class _PageOf(StepHooks):
    """Keeps the episode's environment, to shoot its page while the prompt waits."""

    env: Any = None

    async def before_observe(self, step: StepContext) -> None:
        self.env = step.env


class _ShootThenApprove:
    """The terminal prompt (``TerminalOperator``, its text into ``out``), answered with
    Enter on its input once the page, with the target boxed, has been shot."""

    def __init__(self, page_of: _PageOf) -> None:
        self.page_of = page_of
        self.out = io.StringIO()
        read, self._answer = os.pipe()
        self._input = os.fdopen(read, "rb", buffering=0)
        self.terminal = TerminalOperator(self._input, self.out, headless=False)
        self.shot = b""

    def waiting(self, index: int) -> None:
        self.terminal.waiting(index)

    async def choose(self, pending: PendingStep) -> Choice:
        async def approve() -> None:
            page = self.page_of.env.session.page
            self.shot = await page.screenshot(clip=PAGE_SHOWN)
            self.out.write("\n")  # the terminal's echo of the Enter typed
            os.write(self._answer, b"\n")

        approving = asyncio.create_task(approve())
        try:
            return await self.terminal.choose(pending)
        finally:
            await approving

    async def hand_back(self, pending: PendingStep) -> None:
        raise RuntimeError("nobody works by hand in this picture")

    def close(self) -> None:
        self._input.close()
        os.close(self._answer)


STEP_PICTURE = """<!doctype html><html><head><style>
body {{ margin: 0; padding: 16px; background: #fff; font: 12px sans-serif; color: #444;
       display: flex; gap: 16px; align-items: flex-start; width: max-content; }}
pre {{ margin: 0; padding: 12px; background: #1e1e1e; color: #ddd; width: 82ch;
      white-space: pre-wrap; font: 13px/1.35 "DejaVu Sans Mono", monospace; }}
figure {{ margin: 0; }} figcaption {{ margin-bottom: 4px; }}
img {{ display: block; border: 1px solid #888; }}
</style></head><body>
<pre id="terminal">{terminal}</pre>
<figure><figcaption>the headed browser while the prompt waits</figcaption>
<img src="data:image/png;base64,{page}"></figure>
</body></html>
"""


async def step_through_picture(work: Path, out: Path, screens: Screens) -> None:
    root = work / "site"
    root.mkdir()
    (root / "counter.html").write_text(COUNTER_PAGE)
    page_of = _PageOf()
    operator = _ShootThenApprove(page_of)
    try:
        with StaticServer(root) as site:
            task = WebTask(id="counter", url=site.url("counter.html"), goal="Apply twice",
                           max_steps=2)
            await run(task, model=FunctionModel(click_apply), filter="truncate",
                      settings=LinewiseSettings(), out_dir=work / "step-run",
                      hooks=[page_of, StepThroughHooks(operator)])
    finally:
        operator.close()
    screens.terminal = operator.out.getvalue()
    picture = STEP_PICTURE.format(terminal=html.escape(screens.terminal.rstrip()),
                                  page=base64.b64encode(operator.shot).decode("ascii"))
    (work / "step-through.html").write_text(picture)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=find_chromium())
        page = await browser.new_page(viewport={"width": 1400, "height": 600})
        await page.goto((work / "step-through.html").as_uri())
        await page.locator("body").screenshot(path=str(out))
        await browser.close()


async def make_screenshots(out_dir: Path) -> Screens:
    """Write ``viewer.png`` and ``step-through.png`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    screens = Screens(viewer=out_dir / "viewer.png", step_through=out_dir / "step-through.png")
    with tempfile.TemporaryDirectory(prefix="linewise-screens-") as folder:
        work = Path(folder)
        (work / "viewer").mkdir()
        (work / "step").mkdir()
        await viewer_picture(work / "viewer", screens.viewer, screens)
        await step_through_picture(work / "step", screens.step_through, screens)
    return screens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", type=Path, default=DOCS, help="where to write the PNGs")
    args = parser.parse_args()
    screens = asyncio.run(make_screenshots(args.out))
    print(f"wrote {screens.viewer} and {screens.step_through}")


if __name__ == "__main__":
    main()
