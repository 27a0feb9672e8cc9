"""Ctrl+C, SIGTERM and SIGHUP for the commands that run episodes: the first Ctrl+C
stops after the current step, the second stops at once; either way every trace and
summary is written.

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

SIGHUP (the terminal the command runs in was closed, or its SSH connection dropped)
stops the same way, with ``EXIT_HANGUP``. It often comes twice (from the shell and from
the kernel as the shell ends), so another SIGHUP changes nothing: the grace period
still bounds the stop. The terminal is gone, so a write to it would fail (EIO) and cut
short what is left to do (the summary table, a bench's report): the standard output and
error that were that terminal are pointed at /dev/null; redirected to a file, they are
kept. A command started with SIGHUP ignored (``nohup``) keeps running, as asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from linewise.cli.exit_codes import EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED

T = TypeVar("T")

StopSignal = Literal["SIGINT", "SIGTERM", "SIGHUP"]

EXIT_CODES: dict[StopSignal, int] = {
    "SIGINT": EXIT_INTERRUPTED, "SIGTERM": EXIT_TERMINATED, "SIGHUP": EXIT_HANGUP}
STOPPED_BY: dict[StopSignal, str] = {
    "SIGINT": "Interrupted", "SIGTERM": "Stopped by SIGTERM",
    "SIGHUP": "Stopped by SIGHUP (the terminal was closed)"}

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
    signal: StopSignal | None = None
    """What stopped it: Ctrl+C (or ``q`` at the step-through prompt, which sets the stop
    event too) is ``SIGINT``; None when nothing did."""

    @property
    def exit_code(self) -> int:
        """The exit code of a stopped command: 143 after SIGTERM, 129 after SIGHUP,
        else 130."""
        return EXIT_CODES[self.signal or "SIGINT"]

    @property
    def stopped_by(self) -> str:
        """How a stopped command says why, e.g. ``Interrupted``."""
        return STOPPED_BY[self.signal or "SIGINT"]


def _terminals() -> list[int]:
    """Of the standard output and error, those that are a terminal."""
    found = []
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd):
                found.append(fd)
    return found


def _leave_closed_terminal(fds: list[int]) -> None:
    """Point each of ``fds`` that was a terminal and is one no more (hung up: its
    ``isatty`` fails) at /dev/null. One still open (a SIGHUP sent by hand) is kept."""
    gone = []
    for fd in fds:
        try:
            still = os.isatty(fd)
        except OSError:
            still = False
        if not still:
            gone.append(fd)
    if not gone:
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in gone:
            os.dup2(null, fd)
    finally:
        os.close(null)


async def run_interruptible(
    main: Callable[[asyncio.Event], Awaitable[T]],
    *,
    stop: asyncio.Event | None = None,
    pause: asyncio.Event | None = None,
) -> Interruptible[T]:
    """Run ``main(stop)`` with SIGINT, SIGTERM and SIGHUP handled as above (``stop``: a
    given event to set, e.g. one the step-through debugger watches too)."""
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    job = asyncio.ensure_future(main(stop))
    presses = 0
    stopping: StopSignal | None = None
    """The first of SIGTERM and SIGHUP, once one came."""
    cancelled = False
    hung_up = False
    terminals = _terminals()

    def say(text: str) -> None:
        with contextlib.suppress(OSError):  # the terminal may be gone
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

    def stop_after_step(name: StopSignal) -> None:
        nonlocal stopping
        stopping = name
        stop.set()  # never a pause: nobody is there to answer a prompt
        say(f"{name}: stopping after the current step (at most {TERM_GRACE_S:g} s)")
        loop.call_later(TERM_GRACE_S, stop_now, f"{TERM_GRACE_S:g} s passed")

    def on_sigterm() -> None:
        if stopping is not None:
            stop_now(f"SIGTERM after {stopping}" if stopping != "SIGTERM" else "SIGTERM again")
            return
        stop_after_step("SIGTERM")

    def on_sighup() -> None:
        nonlocal hung_up
        hung_up = True
        _leave_closed_terminal(terminals)
        if stopping is None:  # a second one is the same hang-up, delivered again
            stop_after_step("SIGHUP")

    handled = [signal.SIGINT, signal.SIGTERM]
    loop.add_signal_handler(signal.SIGINT, on_sigint)
    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # not under nohup
        loop.add_signal_handler(signal.SIGHUP, on_sighup)
        handled.append(signal.SIGHUP)
    try:
        result = await job
    except asyncio.CancelledError:
        if not cancelled:
            raise
        result = None
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
        if hung_up:
            # The hang-up delivered again (by the kernel once the shell has ended) must
            # not kill what is left to do: the summary table, a bench's report.
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if cancelled or stop.is_set():
        return Interruptible(result, True, stopping or "SIGINT")
    return Interruptible(result, False)
