"""Opening a ``--playwright-trace`` chunk in Playwright's trace viewer, on the Chromium
linewise runs with.

``playwright show-trace`` opens its viewer in Playwright's own Chromium build, which a
machine set up by ``linewise setup`` does not have (it uses the distribution's
Chromium), and the ``playwright`` command is not on PATH inside a virtualenv that was
never activated. So this runs the driver bundled with the Playwright package, and shows
it the Chromium ``find_chromium`` finds as if it were Playwright's own build: a private
browsers folder (``PLAYWRIGHT_BROWSERS_PATH``) whose only entry is a link to it, named
as the pinned driver expects (``chromium-<revision>/chrome-linux/chrome``, the revision
from the driver's ``browsers.json``). With no Chromium found, the driver looks for its
own build as usual.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from playwright._impl._driver import compute_driver_executable

from linewise.errors import ConfigError
from linewise.runtime.browser.chromium import find_chromium


def driver_command() -> list[str]:
    """The bundled Playwright driver's command line (its Node and its CLI script)."""
    node, cli = compute_driver_executable()
    return [str(node), str(cli)]


def chromium_revision(cli: Path) -> str:
    """The Chromium build the driver expects, from the ``browsers.json`` beside its CLI."""
    browsers = json.loads((cli.parent / "browsers.json").read_text(encoding="utf-8"))
    return next(str(b["revision"]) for b in browsers["browsers"] if b["name"] == "chromium")


@contextmanager
def browsers_folder(chromium: str, revision: str) -> Iterator[Path]:
    """A folder in which the driver finds ``chromium`` as its own Chromium build."""
    with tempfile.TemporaryDirectory(prefix="linewise-show-trace-") as folder:
        link = Path(folder) / f"chromium-{revision}" / "chrome-linux" / "chrome"
        link.parent.mkdir(parents=True)
        link.symlink_to(Path(chromium).resolve())
        yield Path(folder)


def require_traces(traces: Sequence[Path]) -> None:
    """Raises ``ConfigError`` naming the trace files that do not exist."""
    missing = [str(trace) for trace in traces if not trace.is_file()]
    if missing:
        raise ConfigError(f"no such trace file: {', '.join(missing)} (a run with "
                          "--playwright-trace writes <episode>/playwright-trace/step-NNN.zip)")


def show_trace(traces: Sequence[Path], chromium: str | None = None) -> int:
    """Open ``traces`` (``step-NNN.zip`` files) in Playwright's trace viewer and wait
    until its window is closed; the driver's exit code.

    Raises:
        ConfigError: a trace file does not exist.
    """
    require_traces(traces)
    command = [*driver_command(), "show-trace", *(str(trace.resolve()) for trace in traces)]
    found = find_chromium(chromium)
    if found is None:
        return subprocess.run(command, check=False).returncode
    with browsers_folder(found, chromium_revision(Path(command[1]))) as folder:
        env = {**os.environ, "PLAYWRIGHT_BROWSERS_PATH": str(folder)}
        return subprocess.run(command, env=env, check=False).returncode
