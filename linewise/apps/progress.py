"""Progress of the long commands that are not a bench (prune, improve): items done out
of planned, counted by how they ended, with an ETA, and notes as phases start and end.

``ProgressDisplay`` shows it one of three ways: a live bar per tally on stderr on a
terminal (rich; notes and log lines print above the bars), one log line per item and
note elsewhere (structlog: what CI logs and ``nohup`` files need, JSON when stderr is
not a terminal), or not at all (the Python API, whose caller has its own). Both shown
forms carry the same numbers, which ``Tally`` computes. The bench has its own display
(apps/bench/progress.py), with more columns.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from datetime import timedelta
from typing import Any, Literal

import structlog

from linewise.runtime.log import configure_logging

log = structlog.get_logger(__name__)

Mode = Literal["bar", "log", "off"]


def eta_text(seconds: float | None) -> str:
    """``0:04:10``, or ``-`` before there is a rate to go by."""
    return "-" if seconds is None else str(timedelta(seconds=round(seconds)))


class Tally:
    """Items (``unit``) done out of ``total``, by kind; ``label`` says what is running."""

    def __init__(self, display: ProgressDisplay, name: str, unit: str, total: int,
                 label: str = "") -> None:
        self.display = display
        self.name = name
        self.unit = unit
        self.total = total
        self.label = label
        self.done = 0
        self.kinds: Counter[str] = Counter()
        self.started_at = time.monotonic()
        self._bar: Any = None  # rich's task id, in bar mode

    @property
    def eta_s(self) -> float | None:
        """The time left at the mean pace so far (the whole time, waits included, over
        the items done)."""
        if self.done == 0:
            return None
        pace = (time.monotonic() - self.started_at) / self.done
        return max(0, self.total - self.done) * pace

    def counts_text(self) -> str:
        return ", ".join(f"{kind} {n}" for kind, n in self.kinds.items())

    def plan(self, total: int) -> None:
        """The number planned changed (a phase was dropped)."""
        self.total = total
        self.display.show(self)

    def relabel(self, label: str) -> None:
        self.label = label
        self.display.show(self)

    def advance(self, kind: str) -> None:
        """One item ended, as ``kind`` (``pruned``, ``succeeded``…)."""
        self.done += 1
        self.kinds[kind] += 1
        self.display.show(self)
        self.display.log_item(self, kind)

    def close(self) -> None:
        self.display.close_tally(self)


class ProgressDisplay:
    """Where tallies and notes are shown (see the module's docstring)."""

    def __init__(self, mode: Mode, log_level: str = "WARNING") -> None:
        self.mode = mode
        self.log_level = log_level
        self._bars: Any = None
        if mode == "bar":
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bars = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}  {task.fields[counts]}  "
                           "{task.fields[elapsed]} elapsed  ETA {task.fields[eta]}"),
                console=Console(stderr=True),
                redirect_stderr=True,
                redirect_stdout=True,
            )
            self._bars.start()
            # structlog writes to the stderr of the moment (runtime/log.py): the bar's
            # redirected one now, so that log lines print above the bars, not through them.
            configure_logging(json_lines=False, level=log_level)

    @classmethod
    def for_terminal(cls, *, log_json: bool, log_level: str) -> ProgressDisplay:
        """Bars on a terminal (unless JSON log lines were asked for), else log lines;
        logging set up to match. The log level ``auto`` is WARNING under the bars, which
        say what the INFO lines would, and INFO otherwise, where the progress lines are
        INFO lines."""
        mode: Mode = "bar" if sys.stderr.isatty() and not log_json else "log"
        level = log_level if log_level != "auto" else ("WARNING" if mode == "bar" else "INFO")
        configure_logging(json_lines=True if log_json else None, level=level)
        return cls(mode, level)

    def tally(self, name: str, unit: str, total: int, label: str = "") -> Tally:
        tally = Tally(self, name, unit, total, label)
        if self._bars is not None:
            tally._bar = self._bars.add_task(label or name, total=total, unit=unit,
                                             counts="", elapsed="0:00:00", eta="-")
        return tally

    def show(self, tally: Tally) -> None:
        if self._bars is None or tally._bar is None:
            return
        elapsed = eta_text(time.monotonic() - tally.started_at)
        self._bars.update(tally._bar, description=tally.label or tally.name,
                          total=tally.total, completed=tally.done, counts=tally.counts_text(),
                          elapsed=elapsed, eta=eta_text(tally.eta_s))

    def log_item(self, tally: Tally, kind: str) -> None:
        if self.mode != "log":
            return
        eta = tally.eta_s
        label = {"step": tally.label} if tally.label else {}
        log.info(f"{tally.name} progress", **label, ended=kind, done=tally.done,
                 total=tally.total, unit=tally.unit, counts=dict(tally.kinds),
                 elapsed_s=round(time.monotonic() - tally.started_at),
                 eta_s=None if eta is None else round(eta), eta=eta_text(eta))

    def note(self, event: str, text: str, **fields: Any) -> None:
        """A line of its own: a phase started or ended, what it gave. Above the bars it
        is ``text``; as a log line ``event`` (one name per kind of note, to find them
        by), with ``text`` as its ``message`` and the ``fields``."""
        if self._bars is not None:
            self._bars.console.print(text, highlight=False)
        elif self.mode == "log":
            log.info(event, message=text, **fields)

    def close_tally(self, tally: Tally) -> None:
        if self._bars is not None and tally._bar is not None:
            self._bars.remove_task(tally._bar)
            tally._bar = None

    def close(self) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None
            configure_logging(json_lines=False, level=self.log_level)


QUIET = ProgressDisplay("off")
"""For callers that show no progress (the Python API, tests)."""
