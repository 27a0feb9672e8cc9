"""Ctrl+C and SIGTERM for the commands that run episodes: the first Ctrl+C stops after
the current step, the second stops at once; either way every trace and summary is
written.

The first press sets a stop flag the step loop checks between steps
(``EpisodeConfig.stop``): the running episodes end ``stopped``/``interrupted`` with
their traces complete and no new episode starts. The second cancels the command, and
the episodes write their summaries on the way out (still ``stopped``: a second press
stops the same run sooner, it does not make it fail).

A headed run watched from a terminal passes a ``pause`` event (the step-through
debugger's, ``runtime/debug/stepper.py``): then a press while the run is not paused
pauses it before the next action instead, and the presses after that stop it as above.

SIGTERM (what ``timeout``, ``docker stop``, CI runners and Ray send) is the first press
without the pause: stop after the current step. Its sender kills the process after a
grace period of its own (``docker stop``: 10 s), and a step can wait minutes on a
model, so after ``TERM_GRACE_S`` (or at a second SIGTERM) the command is cancelled as
by the second press. Either way the command closes Chromium, Playwright's driver and
the local model server itself before it exits, with ``EXIT_TERMINATED``.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from linewise.cli.exit_codes import EXIT_INTERRUPTED, EXIT_TERMINATED

T = TypeVar("T")

TERM_GRACE_S = 5.0
"""How long SIGTERM waits for the current step before stopping at once: half of
``docker stop``'s 10 s, leaving the rest for writing the summaries and closing the
browser before the sender's SIGKILL."""


@dataclass
class Interruptible(Generic[T]):
    """What came of the command: its result (None when stopped at once) and whether the
    user stopped it, and with which signal."""

    result: T | None
    interrupted: bool
    signal: Literal["SIGINT", "SIGTERM"] | None = None
    """What stopped it: Ctrl+C (or ``q`` at the step-through prompt, which sets the stop
    event too) is ``SIGINT``; None when nothing did."""

    @property
    def exit_code(self) -> int:
        """The exit code of a stopped command: 143 after SIGTERM, else 130."""
        return EXIT_TERMINATED if self.signal == "SIGTERM" else EXIT_INTERRUPTED

    @property
    def stopped_by(self) -> str:
        """How a stopped command says why, e.g. ``Interrupted``."""
        return "Stopped by SIGTERM" if self.signal == "SIGTERM" else "Interrupted"


async def run_interruptible(
    main: Callable[[asyncio.Event], Awaitable[T]],
    *,
    stop: asyncio.Event | None = None,
    pause: asyncio.Event | None = None,
) -> Interruptible[T]:
    """Run ``main(stop)`` with SIGINT and SIGTERM handled as above (``stop``: a given
    event to set, e.g. one the step-through debugger watches too)."""
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    job = asyncio.ensure_future(main(stop))
    presses = 0
    terminated = False
    cancelled = False

    def say(text: str) -> None:
        print(f"linewise: {text}", file=sys.stderr, flush=True)

    def stop_now(why: str) -> None:
        nonlocal cancelled
        if cancelled or job.done():
            return
        cancelled = True
        say(f"stopping now ({why}); writing the summaries")
        job.cancel()

    def on_sigint() -> None:
        nonlocal presses
        if pause is not None and not pause.is_set() and not stop.is_set():
            pause.set()
            say("pausing before the next action (Ctrl+C again to stop)")
            return
        presses += 1
        if presses == 1 and not stop.is_set():
            stop.set()
            say("stopping after the current step (Ctrl+C again to stop now)")
        else:
            stop_now("Ctrl+C again")

    def on_sigterm() -> None:
        nonlocal terminated
        if terminated:
            stop_now("SIGTERM again")
            return
        terminated = True
        stop.set()  # never a pause: nobody is there to answer a prompt
        say(f"SIGTERM: stopping after the current step (at most {TERM_GRACE_S:g} s)")
        loop.call_later(TERM_GRACE_S, stop_now, f"{TERM_GRACE_S:g} s passed")

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        result = await job
    except asyncio.CancelledError:
        if not cancelled:
            raise
        result = None
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)
    if cancelled or stop.is_set():
        return Interruptible(result, True, "SIGTERM" if terminated else "SIGINT")
    return Interruptible(result, False)
