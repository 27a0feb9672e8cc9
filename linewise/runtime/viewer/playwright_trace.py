"""``--playwright-trace``: a Playwright trace of every step, for ``playwright show-trace``.

Tracing starts on the episode's browser context at its first action; each step's action
is one chunk titled with the action, saved as ``playwright-trace/step-NNN.zip`` in the
episode folder when the action has run. The chunk holds Playwright's own record of the
action: DOM snapshots before and after, screenshots, network and console. Recording is
best effort: a failure is noted in the step's ``hook_notes``, never fails the step.
Only linewise's Chromium environment can be traced (BrowserGym's gym env drives its own
browser).
"""

from __future__ import annotations

import weakref
from pathlib import Path

import structlog
from playwright.async_api import BrowserContext
from playwright.async_api import Error as PlaywrightError

from linewise.runtime.envs.chromium import ChromiumEnv
from linewise.runtime.episode import StepContext, StepHooks
from linewise.settings import LinewiseSettings

log = structlog.get_logger(__name__)

TRACE_DIR = "playwright-trace"
NOTE = "playwright_trace"


def chunk_path(directory: Path, index: int) -> Path:
    return directory / TRACE_DIR / f"step-{index:03d}.zip"


def chunk_title(step: StepContext) -> str:
    return str(step.action) if step.action is not None else "no action"


class PlaywrightTraceHooks(StepHooks):
    """Records one Playwright trace chunk per step of every episode it sees."""

    def __init__(self) -> None:
        self._tracing: weakref.WeakSet[BrowserContext] = weakref.WeakSet()

    @staticmethod
    def _context(step: StepContext) -> BrowserContext | None:
        if isinstance(step.env, ChromiumEnv):
            return step.env.session.context
        return None

    async def before_act(self, step: StepContext) -> None:
        context = self._context(step)
        if context is None or step.directory is None:
            step.notes[NOTE] = "not recorded: only linewise's Chromium environment is traced"
            return
        try:
            if context not in self._tracing:
                await context.tracing.start(screenshots=True, snapshots=True)
                self._tracing.add(context)
            await context.tracing.start_chunk(title=chunk_title(step))
        except PlaywrightError as exc:
            step.notes[NOTE] = f"not recorded: {exc.message.splitlines()[0]}"

    async def after_act(self, step: StepContext) -> None:
        context = self._context(step)
        if context is None or step.directory is None or NOTE in step.notes:
            return
        path = chunk_path(step.directory, step.index)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            await context.tracing.stop_chunk(path=path)
        except PlaywrightError as exc:
            step.notes[NOTE] = f"not recorded: {exc.message.splitlines()[0]}"
            log.warning("playwright trace chunk lost", step=step.index, error=str(exc))
            return
        step.notes[NOTE] = path.relative_to(step.directory).as_posix()


def trace_hooks(settings: LinewiseSettings) -> list[StepHooks]:
    """The hooks the settings ask for on every episode (``browser.playwright_trace``)."""
    return [PlaywrightTraceHooks()] if settings.browser.playwright_trace else []
