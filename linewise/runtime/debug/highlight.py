"""``--highlight MS``: the box around an action's target, shown for MS before it runs.

For people watching a headed run: each action's element is boxed (``overlay``) for a
moment before the action runs, then the box is removed, so the action and the next
observation never see it. Off in headless runs, where nobody could see it.
"""

from __future__ import annotations

import asyncio

from linewise.runtime.debug.overlay import hide_target, show_target
from linewise.runtime.episode import StepContext, StepHooks
from linewise.settings import LinewiseSettings


class HighlightHooks(StepHooks):
    """Boxes every action's target for ``duration_ms`` before the action runs."""

    def __init__(self, duration_ms: int) -> None:
        self.duration_s = duration_ms / 1000

    async def before_act(self, step: StepContext) -> None:
        if step.action is None or not step.action.bids:
            return
        try:
            if await show_target(step.env, step.action) is not None:
                await asyncio.sleep(self.duration_s)
        finally:
            await hide_target(step.env)


def highlight_hooks(settings: LinewiseSettings) -> list[StepHooks]:
    """The hooks ``browser.highlight_ms`` asks for: none when off or headless."""
    browser = settings.browser
    if browser.highlight_ms <= 0 or browser.headless:
        return []
    return [HighlightHooks(browser.highlight_ms)]
