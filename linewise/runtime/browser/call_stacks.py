"""Playwright's record of who called it, taken without reading source files.

Every Playwright API call captures the Python stack of its caller: the driver names the
call after the innermost Playwright method (the ``Page.goto:`` prefix of its errors) and a
recorded Playwright trace shows the caller's file and line. The Playwright that
BrowserGym pins (1.44) takes that stack with ``inspect.stack()``, which, for every frame,
resolves the source file on disk and reads a line of context that nobody uses:
milliseconds a call, a large share of a step's own Python time, and more under a deep
stack (a test runner, a debugger). Later Playwright releases walk the frames directly.

``install`` gives the Playwright modules that take stacks the same walk: the frames, their
file names (the code object's), line numbers and function names, with no source context.
It changes nothing Playwright reports, and leaves ``inspect`` itself untouched for
everyone else. It is idempotent, and a no-op for a Playwright whose modules no longer
call ``inspect.stack``.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types

TAKERS = ("playwright._impl._connection", "playwright._impl._network",
          "playwright._impl._sync_base")
"""The Playwright modules that take a stack for each call or each routed request."""


def frames(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack()`` as Playwright uses it: the caller's frame and every frame
    above it, each with its file name, line and function, and no source context
    (``context`` is accepted for the same signature and ignored)."""
    frame: types.FrameType | None = sys._getframe(1)
    found = []
    while frame is not None:
        code = frame.f_code
        found.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno,
                                       code.co_name, None, None))
        frame = frame.f_back
    return found


def _inspect_with_frames() -> types.ModuleType:
    """A stand-in for the ``inspect`` module whose ``stack`` is ``frames``."""
    stand_in = types.ModuleType("inspect", inspect.__doc__)
    stand_in.__dict__.update(inspect.__dict__)
    stand_in.stack = frames  # type: ignore[attr-defined]
    return stand_in


_STAND_IN = _inspect_with_frames()


def install() -> list[str]:
    """Give every stack-taking Playwright module ``frames``; the modules changed (none
    the second time, or for a Playwright that no longer uses ``inspect.stack``)."""
    changed = []
    for name in TAKERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(module, "inspect", None) is inspect:
            module.inspect = _STAND_IN  # type: ignore[attr-defined]
            changed.append(name)
    return changed
