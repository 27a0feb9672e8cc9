"""A real terminal for interactive commands: a tmux pane on a private server, with an
X display from Xvfb for headed Chromium; and a way into that Chromium over its DevTools
port, to act in the page as a person at the window would."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MISSING = [tool for tool in ("tmux", "Xvfb") if shutil.which(tool) is None]
needs_terminal = pytest.mark.skipif(
    bool(MISSING),
    reason=f"needs {' and '.join(MISSING)} (apt-get install tmux xvfb; `linewise setup` "
    "lists them)",
)


@contextmanager
def xvfb_display() -> Iterator[str]:
    """A fresh X display, e.g. ``:42``, for as long as the block runs."""
    read, write = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
        pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    os.close(write)
    try:
        with os.fdopen(read) as answer:
            number = answer.readline().strip()
        if not number:
            raise RuntimeError("Xvfb did not start")
        yield f":{number}"
    finally:
        server.terminate()
        server.wait(timeout=10)


class Pane:
    """One command running in a tmux pane of its own tmux server."""

    def __init__(self, socket: Path, exit_file: Path) -> None:
        self.socket = socket
        self.exit_file = exit_file

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", str(self.socket), *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def text(self) -> str:
        """Everything the pane shows, scrollback included."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-5000", "-t", "run")

    def send(self, *keys: str) -> None:
        """tmux key names (``Enter``, ``C-c``) or literal text."""
        self.tmux("send-keys", "-t", "run", *keys)

    def type_line(self, text: str) -> None:
        self.tmux("send-keys", "-t", "run", "-l", text)
        self.send("Enter")

    def wait_for(self, pattern: str, count: int = 1, timeout_s: float = 40) -> str:
        """The pane's text once ``pattern`` (a regex) occurs ``count`` times."""
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if len(re.findall(pattern, text)) >= count:
                return text
            if self.exit_file.exists():
                break
            time.sleep(0.1)
        raise AssertionError(f"never saw {pattern!r} x{count} in the pane:\n{text}")

    def wait_exit(self, timeout_s: float = 40) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.exit_file.exists() and self.exit_file.read_text().strip():
                return int(self.exit_file.read_text())
            time.sleep(0.1)
        raise AssertionError(f"the command did not end:\n{self.text()}")

    def pid(self) -> int:
        return int(self.tmux("display-message", "-p", "-t", "run", "#{pane_pid}").strip())


@contextmanager
def linewise_in_pane(args: list[str], workdir: Path, display: str | None) -> Iterator[Pane]:
    """``linewise ARGS`` in a 200x50 tmux pane; the pane's shell writes the exit code.
    ``display``: the X display to give it; None gives it none at all."""
    socket = workdir / "tmux.sock"
    exit_file = workdir / "exit_code"
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OPENAI_", "LINEWISE_", "TMUX"))
             and k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    if display is not None:
        clean["DISPLAY"] = display
    command = shlex.join([sys.executable, "-m", "linewise.cli.main", *args])
    shell = f"{command}; echo $? > {shlex.quote(str(exit_file))}; sleep 600"
    subprocess.run(["tmux", "-S", str(socket), "-f", "/dev/null", "new-session", "-d",
                    "-s", "run", "-x", "200", "-y", "50", shell],
                   check=True, env=clean, timeout=10)
    pane = Pane(socket, exit_file)
    try:
        yield pane
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True,
                       timeout=10)


def devtools_port_under(pid: int) -> int:
    """The DevTools port of the Chromium started by process ``pid`` or its children."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            cmdline = (Path("/proc") / str(current) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            cmdline = []
        for arg in cmdline:
            if arg.startswith(b"--remote-debugging-port="):
                return int(arg.split(b"=", 1)[1])
        pending.extend(children.get(current, []))
    raise AssertionError(f"no Chromium with a DevTools port under process {pid}")
