"""The terminal side of the step-through debugger (``linewise run --step``).

Before each action it prints the step: the model's thought, its action and the element
the action names, and how much of the page the filter showed; then it reads one short
command per line (``HELP``). An action typed in place of the model's is parsed by the
agent's own parser and refused with the parser's message if it is not valid.
"""

from __future__ import annotations

import asyncio
import os
import sys
import termios
import time
from typing import TextIO

from linewise.agent.action_parser import parse_action
from linewise.errors import ActionParseError, ConfigError
from linewise.runtime.debug.stepper import Choice, PendingStep

HELP = (
    "keys: [Enter] run it · o ACTION (or just type an action) run another · s skip · "
    "t full tree · v filtered view · m take over by hand · c continue without stopping · "
    "q quit · ? help"
)
HEADLESS_HELP = HELP.replace(" · m take over by hand", "")
"""A headless run has no window to take over in, so ``m`` is not offered."""

NO_WINDOW = (
    "m: this run is headless, there is no browser window to work in. Type the action to "
    "run instead (o ACTION; t shows the tree with the elements' ids), s to skip the step, "
    "or run again with --headed to work in the page by hand."
)

NO_TERMINAL = (
    "--step needs a terminal to ask at every step, and standard input is not one "
    "(piped, or a CI job). Run it from a terminal, or drop --step."
)


def require_terminal(stream: TextIO | None = None) -> None:
    """Fail with ``ConfigError`` (exit 2) when standard input is not a terminal."""
    stream = stream if stream is not None else sys.stdin
    if stream is None or not stream.isatty():
        raise ConfigError(NO_TERMINAL)


def view_summary(pending: PendingStep) -> str:
    """How much of the page the model was shown, and by which filter."""
    if pending.kept_lines >= pending.total_lines:
        shown = f"the model saw all {pending.total_lines} lines of the tree"
    else:
        shown = (f"the model saw {pending.kept_lines} of the tree's {pending.total_lines} "
                 "lines")
    return f"{shown} (filter: {pending.filter})"


class TerminalOperator:
    """Asks the person at the terminal; reads lines from ``stdin`` without blocking the
    run's event loop (other episodes' work, Ctrl+C, the run's deadlines go on).
    ``headless``: the run shows no browser window, so working by hand (``m``) is
    refused, with what to do instead."""

    def __init__(self, stdin: TextIO | None = None, out: TextIO | None = None, *,
                 headless: bool = False) -> None:
        self.stdin = stdin if stdin is not None else sys.stdin
        self.out = out if out is not None else sys.stdout
        self.headless = headless
        self.help = HEADLESS_HELP if headless else HELP
        self._buffer = b""
        self._closed = False

    async def choose(self, pending: PendingStep) -> Choice:
        self._discard_typed_ahead()
        self._show(pending)
        while True:
            line = await self._read_line("step> ")
            if line is None:
                self._say("(end of input: quitting)")
                return Choice("quit")
            command = line.strip()
            if command == "":
                if pending.action is None:
                    self._say("The model gave no valid action: type one, s to skip or q "
                              "to quit.")
                    continue
                return Choice("run")
            if command in ("s", "skip"):
                return Choice("skip")
            if command in ("q", "quit"):
                return Choice("quit")
            if command in ("c", "continue"):
                return Choice("continue")
            if command in ("m", "manual"):
                if self.headless:
                    self._say(NO_WINDOW)
                    continue
                return Choice("manual")
            if command in ("t", "tree"):
                self._say(f"--- full tree ({pending.total_lines} lines) ---\n{pending.full_tree}")
                continue
            if command in ("v", "view"):
                self._say(f"--- what the model saw ({pending.kept_lines} of "
                          f"{pending.total_lines} lines) ---\n{pending.filtered_view}")
                continue
            if command in ("?", "h", "help"):
                self._say(self.help)
                continue
            text = command[2:].strip() if command.startswith("o ") else command
            if command == "o":
                entered = await self._read_line("action> ")
                if entered is None:
                    return Choice("quit")
                text = entered.strip()
            if "(" not in text:
                self._say(f"Unknown command {command!r}. {self.help}")
                continue
            try:
                return Choice("override", parse_action(text))
            except ActionParseError as exc:
                self._say(f"Not run: {exc}")

    async def hand_back(self, pending: PendingStep) -> None:
        self._say("Take over: work in the browser window, then press Enter here to give "
                  "control back to the agent (it will look at the page afresh).")
        await self._read_line("manual> ")

    def waiting(self, index: int) -> None:
        self._say(f"--- step {index}: waiting for the model's answer (asked at "
                  f"{time.strftime('%H:%M:%S')}; a local model can take minutes) …")

    def _show(self, pending: PendingStep) -> None:
        lines = [f"=== step {pending.index} · {pending.title or '(untitled)'} · {pending.url}",
                 f"goal:    {' '.join(pending.goal.split())}"]
        if pending.think:
            lines.append(f"thought: {' '.join(pending.think.split())}")
        if pending.action is not None:
            lines.append(f"action:  {pending.action}")
        else:
            lines.append(f"action:  (none: {pending.parse_error or 'no valid action'})")
            if pending.action_text:
                lines.append(f"         the model wrote: {pending.action_text}")
        target = pending.target
        if target is not None:
            element = f"[{target.bid}] {target.role}"
            if target.name:
                element += f" {target.name!r}"
            where = (f"line {target.line} of the tree" if target.line is not None
                     else "not in the tree")
            shown = "shown to the model" if target.shown else "NOT shown to the model"
            if self.headless:  # no window: where the box is drawn, nobody sees it
                lines.append(f"target:  {element} ({where}, {shown})")
            else:
                boxed = "boxed in the browser" if target.box is not None else "not drawn"
                lines.append(f"target:  {element} ({where}, {shown}, {boxed})")
        lines.append(f"view:    {view_summary(pending)}")
        lines.append(self.help)
        self._say("\n".join(lines))

    def _discard_typed_ahead(self) -> None:
        """Forget keys pressed before this step was shown: an Enter typed while the model
        was thinking must not approve an action nobody has seen."""
        self._buffer = b""
        if self.stdin.isatty():
            termios.tcflush(self.stdin.fileno(), termios.TCIFLUSH)

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    async def _read_line(self, prompt: str) -> str | None:
        """One line typed at the terminal; None once its input has ended."""
        print(prompt, end="", file=self.out, flush=True)
        while b"\n" not in self._buffer:
            if self._closed:
                return None
            chunk = await self._read_some()
            if not chunk:
                self._closed = True
                if not self._buffer:
                    return None
                self._buffer += b"\n"
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace")

    async def _read_some(self) -> bytes:
        loop = asyncio.get_running_loop()
        fd = self.stdin.fileno()
        ready: asyncio.Future[bytes] = loop.create_future()

        def on_readable() -> None:
            if not ready.done():
                try:
                    ready.set_result(os.read(fd, 4096))
                except OSError:
                    ready.set_result(b"")

        loop.add_reader(fd, on_readable)
        try:
            return await ready
        finally:
            loop.remove_reader(fd)
