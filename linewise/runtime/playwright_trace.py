"""``--playwright-trace``: a Playwright trace of every step, for ``playwright show-trace``.

Tracing starts on the episode's browser context at its first action; each step's action
is one chunk titled with the action, saved as ``playwright-trace/step-NNN.zip`` in the
episode folder when the action has run. The chunk holds Playwright's own record of the
action: DOM snapshots before and after, screenshots, network and console; of linewise's
Chromium, only the action's own calls (``agent/trace_zone.py``). Recording is
best effort: a failure is noted in the step's ``hook_notes``, never fails the step.
Both browsers are traced: linewise's Chromium from the asyncio loop, BrowserGym's on its
environment's worker thread (sync Playwright), where a chunk also holds BrowserGym's own
reading of the page after the action (``env.step`` does both).
"""

from __future__ import annotations

import weakref
from pathlib import Path

import structlog
from playwright.async_api import Error as PlaywrightError

from linewise.errors import LinewiseError
from linewise.runtime.envs.base import PageAccess
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
        self._tracing: weakref.WeakSet[object] = weakref.WeakSet()
        """The environments whose browser context is tracing (started once per episode)."""

    async def before_act(self, step: StepContext) -> None:
        env, title = step.env, chunk_title(step)
        if step.directory is None or not isinstance(env, PageAccess):
            step.notes[NOTE] = "not recorded: this environment has no browser to trace"
            return
        try:
            await env.start_trace_chunk(title, first=env not in self._tracing)
        except (PlaywrightError, LinewiseError) as exc:
            step.notes[NOTE] = f"not recorded: {_first_line(exc)}"
            return
        self._tracing.add(env)

    async def after_act(self, step: StepContext) -> None:
        env = step.env
        if (step.directory is None or NOTE in step.notes or not isinstance(env, PageAccess)
                or env not in self._tracing):
            return
        path = chunk_path(step.directory, step.index)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            await env.stop_trace_chunk(path)
        except (PlaywrightError, LinewiseError) as exc:
            step.notes[NOTE] = f"not recorded: {_first_line(exc)}"
            log.warning("playwright trace chunk lost", step=step.index, error=str(exc))
            return
        step.notes[NOTE] = path.relative_to(step.directory).as_posix()


def _first_line(exc: Exception) -> str:
    message = exc.message if isinstance(exc, PlaywrightError) else str(exc)
    return message.splitlines()[0] if message else type(exc).__name__


def trace_hooks(settings: LinewiseSettings) -> list[StepHooks]:
    """The hooks the settings ask for on every episode (``browser.playwright_trace``)."""
    return [PlaywrightTraceHooks()] if settings.browser.playwright_trace else []
