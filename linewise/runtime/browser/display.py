"""Whether a headed Chromium has a display to open its window on.

On Linux without one, Chromium started headed neither opens a window nor exits, and
Playwright waits out its 3-minute launch timeout before blaming the install. A headed
launch is refused at once instead (``require_display``): ``DISPLAY`` or
``WAYLAND_DISPLAY`` must be set, and a local X display (``:N``) must have its X server
listening (a ``DISPLAY`` left behind by an ended ssh or Xvfb session hangs the same
way). Other systems always have a screen to use.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Mapping

from linewise.errors import ConfigError

X11_SOCKET = "/tmp/.X11-unix/X{number}"
_LOCAL_DISPLAY = re.compile(r"(?:unix)?:(\d+)(?:\.\d+)?")


def x_server_listens(number: int) -> bool:
    """Whether an X server accepts connections on local display ``:number``: at its
    socket file, or at the abstract socket of the same name (the one X servers in
    containers may be reached by)."""
    path = X11_SOCKET.format(number=number)
    for address in (path, "\0" + path):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1)
            try:
                probe.connect(address)
            except OSError:
                continue
            return True
    return False


def display_problem(environ: Mapping[str, str] | None = None,
                    platform: str = sys.platform) -> str | None:
    """Why a headed Chromium could not open its window here, or None when it can (as far
    as can be told: a remote ``host:N`` display is taken on trust)."""
    if not platform.startswith("linux"):
        return None
    env = os.environ if environ is None else environ
    if env.get("WAYLAND_DISPLAY"):
        return None
    display = env.get("DISPLAY", "")
    if not display:
        return "there is no display: DISPLAY and WAYLAND_DISPLAY are not set"
    local = _LOCAL_DISPLAY.fullmatch(display)
    if local is not None and not x_server_listens(int(local.group(1))):
        return (f"DISPLAY={display} names no running X server (nothing listens at "
                f"{X11_SOCKET.format(number=local.group(1))})")
    return None


def require_display(environ: Mapping[str, str] | None = None) -> None:
    """Refuse a headed launch without a display (``ConfigError``), naming the fix."""
    problem = display_problem(environ)
    if problem is not None:
        raise ConfigError(
            f"a headed Chromium needs a display, and {problem}. Run under a virtual "
            "display (xvfb-run -a …; `linewise setup --xvfb` installs it), or headless."
        )
