"""MiniWoB++ episodes: start a seeded task on a page and read its reward.

The pages come from ``miniwob_server.MiniWoBServer``. Setting an episode up follows
BrowserGym's MiniWoB++ tasks so scores are comparable:

* the page's ``Math.random`` is seeded with ``Math.seedrandom(n)`` where ``n`` is drawn from
  ``numpy.random.RandomState(seed)`` exactly as BrowserGym draws it, so a linewise seed gives
  the same problem as BrowserGym's ``miniwob.<name>`` reset with that seed;
* ``core.EPISODE_MAX_TIME`` is set so long that the page's own timer never ends an episode
  (the runtime's step budget does that);
* ``core.startEpisodeReal()`` generates the problem, then we wait for ``WOB_TASK_READY``.

The human display (the yellow ``#query`` goal box, the ``#reward-display`` HUD, the
``#click-canvas`` click tracker and the black ``#sync-task-cover`` "START" cover) is hidden
with one injected stylesheet instead of patching ``core``'s functions: ``#query`` becomes
``visibility: hidden`` (it keeps its box, so the task area stays where the task author put it)
and the others ``display: none``. Both take the nodes out of the accessibility tree, while the
DOM stays intact, so ``core.getUtterance()`` (which reads ``#query``'s text) and
``core.endEpisode()`` (which writes into the HUD) keep working unchanged. The rules are
``!important``, so they also beat the inline ``display: block`` that ``core.startEpisode()``
puts on the cover when an episode ends.
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from pydantic import BaseModel, ConfigDict

from linewise.errors import BrowserError
from linewise.runtime.tasks.miniwob_server import MiniWoBServer

log = structlog.get_logger(__name__)

__all__ = [
    "EPISODE_MAX_TIME_MS",
    "MiniWoBServer",  # defined in miniwob_server; the server an episode runs on
    "MiniWoBStatus",
    "page_seed",
    "read_miniwob_status",
    "start_miniwob_episode",
]

EPISODE_MAX_TIME_MS = 2**31 - 1
"""The page timer's episode length: the largest delay ``setTimeout`` accepts (about 24.8 days).

BrowserGym uses 1,000,000 ms (about 17 minutes), which a slow local model can exceed; a
larger value would overflow ``setTimeout``'s 32-bit delay and end the episode at once."""

READY_TIMEOUT_MS = 10_000
"""How long to wait for a task page to load and report ``WOB_TASK_READY``."""

_MARKER = "__linewiseMiniwob"
"""A window property set when an episode starts; a navigation or reload wipes it."""

_HIDE_HUMAN_DISPLAY_CSS = """
#query, #query * { visibility: hidden !important; }
#reward-display, #click-canvas, #sync-task-cover { display: none !important; }
"""

_SETUP_JS = """
({seed, maxTime, css, marker, name}) => {
  if (typeof core === 'undefined' || typeof Math.seedrandom !== 'function') {
    return 'core.js is not loaded on this page';
  }
  const style = document.createElement('style');
  style.id = 'linewise-hide-human-display';
  style.textContent = css;
  document.head.appendChild(style);
  Math.seedrandom(seed);
  core.EPISODE_MAX_TIME = maxTime;
  core.startEpisodeReal();
  // The countdown only repaints the hidden HUD once a second; stop it so the DOM stays still.
  window.clearInterval(core.CD_TIMER);
  // The click tracker only draws on the hidden canvas; its listener would make the whole
  // body read as a clickable element (BrowserGym removes it too).
  document.body.removeEventListener('click', core.canvasDrawClick);
  window[marker] = {name: name, seed: seed};
  return null;
}
"""

_STATUS_JS = """
(marker) => {
  if (typeof core === 'undefined' || typeof WOB_DONE_GLOBAL === 'undefined') {
    return {state: 'no-core'};
  }
  if (window[marker] === undefined) {
    return {state: 'not-started'};
  }
  return {
    state: 'ok',
    raw_reward: WOB_RAW_REWARD_GLOBAL,
    done: WOB_DONE_GLOBAL,
    reason: WOB_REWARD_REASON,
  };
}
"""


# --------------------------------------------------------------------------- seeds


def page_seed(seed: int) -> int:
    """Return the number given to ``Math.seedrandom`` for ``seed``, the way BrowserGym draws it.

    Args:
        seed: the task seed, ``0 <= seed < 2**32``.

    Raises:
        ValueError: ``seed`` is out of range.
    """
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    import numpy as np  # deferred: numpy is only needed when an episode starts

    return int(np.random.RandomState(seed).randint(0, 1_000_000))


# --------------------------------------------------------------------------- episodes


class MiniWoBStatus(BaseModel):
    """Where a MiniWoB++ episode stands, read from the task page's globals."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reward: float
    """1.0 if ``raw_reward`` is positive, else 0.0 (BrowserGym's success criterion)."""
    raw_reward: float
    """``WOB_RAW_REWARD_GLOBAL``: the task's reward in [-1, 1] before any time penalty."""
    done: bool
    """``WOB_DONE_GLOBAL``: the task has ended the episode (success or failure)."""
    reason: str | None = None
    """``WOB_REWARD_REASON`` if the task gave one, or why the episode cannot go on."""


async def start_miniwob_episode(page: Page, name: str, seed: int, server: MiniWoBServer) -> str:
    """Open task ``name`` on ``page``, start a seeded episode and return its goal.

    The page is navigated to the task afresh, the human display is hidden, the page's random
    generator is seeded from ``seed`` and the problem is generated. The same ``name`` and
    ``seed`` always give the same goal and page.

    Raises:
        ValueError: ``name`` is not a MiniWoB++ task.
        BrowserError: the page cannot be loaded, the task does not start, or its goal is empty.
    """
    url = server.url_for(name)
    js_seed = page_seed(seed)
    try:
        await page.goto(url, wait_until="load", timeout=READY_TIMEOUT_MS)
        problem = await page.evaluate(
            _SETUP_JS,
            {
                "seed": js_seed,
                "maxTime": EPISODE_MAX_TIME_MS,
                "css": _HIDE_HUMAN_DISPLAY_CSS,
                "marker": _MARKER,
                "name": name,
            },
        )
        if problem:
            raise BrowserError(f"MiniWoB++ task '{name}' at {url}: {problem}")
        await page.wait_for_function("() => WOB_TASK_READY === true", timeout=READY_TIMEOUT_MS)
        utterance = await page.evaluate("() => core.getUtterance()")
    except PlaywrightError as exc:
        raise BrowserError(f"cannot start MiniWoB++ task '{name}' at {url}: {exc}") from exc
    goal = _goal_text(utterance)
    if not goal:
        raise BrowserError(f"MiniWoB++ task '{name}' (seed {seed}) gave an empty goal")
    log.info("miniwob_episode_started", task=name, seed=seed, page_seed=js_seed, goal=goal)
    return goal


async def read_miniwob_status(page: Page) -> MiniWoBStatus:
    """Read the reward and done flag of the episode running on ``page``.

    If the page is no longer the task page the episode was started on (the agent navigated
    away or reloaded it), the episode is reported done with reward 0 and a reason instead of
    raising.

    Raises:
        BrowserError: the page is closed.
    """
    if page.is_closed():
        raise BrowserError("cannot read the MiniWoB++ status: the page is closed")
    try:
        raw: dict[str, Any] = await page.evaluate(_STATUS_JS, _MARKER)
    except PlaywrightError as exc:
        if page.is_closed():
            raise BrowserError("cannot read the MiniWoB++ status: the page is closed") from exc
        # Typically "Execution context was destroyed": a navigation is under way.
        return _ended(f"the page navigated away from the task ({page.url})")
    state = raw.get("state")
    if state == "no-core":
        return _ended(f"the page navigated away from the task ({page.url})")
    if state == "not-started":
        return _ended(f"the task page was reloaded or replaced; no episode is running ({page.url})")
    raw_reward = float(raw.get("raw_reward") or 0.0)
    return MiniWoBStatus(
        reward=1.0 if raw_reward > 0 else 0.0,
        raw_reward=raw_reward,
        done=bool(raw.get("done")),
        reason=_reason_text(raw.get("reason")),
    )


def _ended(reason: str) -> MiniWoBStatus:
    return MiniWoBStatus(reward=0.0, raw_reward=0.0, done=True, reason=reason)


def _goal_text(utterance: Any) -> str:
    """Extract the goal from ``core.getUtterance()``: a string, or a dict with ``utterance``."""
    if isinstance(utterance, dict):
        utterance = utterance.get("utterance")
    return " ".join(str(utterance).split()) if utterance is not None else ""


def _reason_text(reason: Any) -> str | None:
    if reason is None or reason == "":
        return None
    return reason if isinstance(reason, str) else json.dumps(reason, default=str)
