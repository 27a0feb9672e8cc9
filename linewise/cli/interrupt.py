"""Ctrl+C for the commands that run episodes: the first press stops after the current
step, the second stops at once; either way every trace and summary is written.

The first press sets a stop flag the step loop checks between steps
(``EpisodeConfig.stop``): the running episodes end ``stopped``/``interrupted`` with
their traces complete and no new episode starts. The second cancels the command, and
the episodes write their summaries on the way out.

A headed run watched from a terminal passes a ``pause`` event (the step-through
debugger's, ``runtime/debug/stepper.py``): then a press while the run is not paused
pauses it before the next action instead, and the presses after that stop it as above.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

EXIT_INTERRUPTED = 130
"""128 + SIGINT, as shells report a command stopped by Ctrl+C."""


@dataclass
class Interruptible(Generic[T]):
    """What came of the command: its result (None when stopped at once) and whether the
    user stopped it."""

    result: T | None
    interrupted: bool


async def run_interruptible(
    main: Callable[[asyncio.Event], Awaitable[T]],
    *,
    stop: asyncio.Event | None = None,
    pause: asyncio.Event | None = None,
) -> Interruptible[T]:
    """Run ``main(stop)`` with SIGINT handled as above (``stop``: a given event to set,
    e.g. one the step-through debugger watches too)."""
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    job = asyncio.ensure_future(main(stop))
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        if pause is not None and not pause.is_set() and not stop.is_set():
            pause.set()
            print("linewise: pausing before the next action (Ctrl+C again to stop)",
                  file=sys.stderr, flush=True)
            return
        presses += 1
        if presses == 1:
            stop.set()
            print("linewise: stopping after the current step (Ctrl+C again to stop now)",
                  file=sys.stderr, flush=True)
        else:
            print("linewise: stopping now; writing the summaries", file=sys.stderr, flush=True)
            job.cancel()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        result = await job
    except asyncio.CancelledError:
        if presses < 2:
            raise
        return Interruptible(None, True)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    return Interruptible(result, stop.is_set())
