"""``--highlight MS``: the box around an action's target, shown for MS before it runs.

For people watching a headed run: each action's element is boxed (``overlay``) for a
moment before the action runs, then the box is removed, so the action and the next
observation never see it. Off in headless runs, where nobody could see it (said once, as
a warning, when it was asked for).

A run that can be paused (a headed run's Ctrl+C, ``runtime/debug/stepper.py``) passes
its pause event: a pause ends the wait at once, and the run places these hooks before
the step-through debugger's, so the debugger, asked next, stops before the boxed action
instead of letting it run.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from linewise.runtime.debug.overlay import hide_target, show_target
from linewise.runtime.episode import StepContext, StepHooks
from linewise.settings import LinewiseSettings

log = structlog.get_logger(__name__)

HEADLESS_WARNING = ("--highlight has no effect in a headless run: nobody can see the box "
                    "(add --headed, or LINEWISE_BROWSER__HEADLESS=false)")


class HighlightHooks(StepHooks):
    """Boxes every action's target for ``duration_ms`` before the action runs, or until
    ``pause`` is set."""

    def __init__(self, duration_ms: int, pause: asyncio.Event | None = None) -> None:
        self.duration_s = duration_ms / 1000
        self.pause = pause

    async def before_act(self, step: StepContext) -> None:
        if step.action is None or not step.action.bids or self._paused():
            return
        try:
            if await show_target(step.env, step.action) is not None:
                await self._wait()
        finally:
            await hide_target(step.env)

    def _paused(self) -> bool:
        return self.pause is not None and self.pause.is_set()

    async def _wait(self) -> None:
        if self.pause is None:
            await asyncio.sleep(self.duration_s)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.pause.wait(), self.duration_s)


def highlight_hooks(
    settings: LinewiseSettings, pause: asyncio.Event | None = None
) -> list[StepHooks]:
    """The hooks ``browser.highlight_ms`` asks for: none when off or headless (with a
    warning: it was asked for and will not be seen)."""
    browser = settings.browser
    if browser.highlight_ms <= 0:
        return []
    if browser.headless:
        log.warning("highlight_ignored", reason=HEADLESS_WARNING)
        return []
    return [HighlightHooks(browser.highlight_ms, pause)]
