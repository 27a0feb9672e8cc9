"""Playwright's driver (a node process) and the Chromium it launches leave signals to
linewise, which stops its episodes and then closes them itself.

A terminal's Ctrl+C, the SIGTERM of ``timeout`` or a CI runner, and the SIGHUP of a
closed terminal go to every process of linewise's process group, the driver included
(Chromium is launched in a group of its own). Left to Playwright, the driver would
close Chromium on any of them, or die, under the running episode, which would then end
on a browser fault instead of stopping after its step (``cli/interrupt.py``). So every
launch passes ``LAUNCH_SIGNALS``, and the driver starts under ``driver_environ``: with
``js/driver_signals.js`` loaded, SIGTERM and SIGHUP no longer end it (its own code
already ignores SIGINT); it ends when linewise closes its pipe, or dies.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypedDict

from linewise.runtime.secret_env import scrubbed_environ


class LaunchSignals(TypedDict):
    handle_sigint: bool
    handle_sigterm: bool
    handle_sighup: bool


LAUNCH_SIGNALS = LaunchSignals(handle_sigint=False, handle_sigterm=False,
                               handle_sighup=False)
"""Keyword arguments of ``BrowserType.launch``: the driver does not close Chromium on
SIGINT, SIGTERM or SIGHUP; linewise stops the run and closes it."""

SIGNALS_SCRIPT = Path(__file__).parent / "js" / "driver_signals.js"

_lock = threading.Lock()
_starting = 0
_saved: str | None = None


def node_options(existing: str | None) -> str:
    """``NODE_OPTIONS`` for the driver: ``existing`` (a user's) and the signals script,
    quoted as node reads the variable (a path may hold spaces)."""
    quoted = str(SIGNALS_SCRIPT).replace("\\", "\\\\").replace('"', '\\"')
    require = f'--require "{quoted}"'
    return f"{existing} {require}" if existing else require


@contextmanager
def driver_environ() -> Iterator[None]:
    """``os.environ`` as Playwright's driver must start with (Playwright copies it into
    the driver's environment): no secret (``secret_env.scrubbed_environ``), and
    ``NODE_OPTIONS`` loading the signals script. Nested and concurrent blocks share one
    change, undone by the last to leave."""
    global _starting, _saved
    with scrubbed_environ():
        with _lock:
            if _starting == 0:
                _saved = os.environ.get("NODE_OPTIONS")
                os.environ["NODE_OPTIONS"] = node_options(_saved)
            _starting += 1
        try:
            yield
        finally:
            with _lock:
                _starting -= 1
                if _starting == 0:
                    if _saved is None:
                        os.environ.pop("NODE_OPTIONS", None)
                    else:
                        os.environ["NODE_OPTIONS"] = _saved
