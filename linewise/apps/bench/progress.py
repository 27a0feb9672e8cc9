"""Bench progress: a rich progress bar on a terminal, one log line per episode otherwise.

Both show the same counts (done / running / failed, infrastructure endings, a rolling
success rate over agent outcomes, tokens so far, ETA) and say when the model endpoint
is down; the log lines are what CI logs and ``nohup`` files need, the bar is what a
person watching a terminal needs.
"""

from __future__ import annotations

import collections
import sys
import time
from typing import Protocol

import structlog

from linewise.apps.bench.outage import OutageNotice
from linewise.apps.bench.results import EpisodeResult
from linewise.runtime.log import configure_logging

log = structlog.get_logger(__name__)

ROLLING_WINDOW = 50
"""Episodes in the rolling success rate: recent enough to show a trend, big enough to
not jump about."""


class Progress(Protocol):
    def start(self, total: int, already_done: int) -> None: ...
    def episode_started(self, label: str) -> None: ...
    def episode_finished(self, result: EpisodeResult) -> None: ...
    def episode_retried(self, result: EpisodeResult) -> None:
        """An infrastructure ending that runs again (no results line)."""
    def endpoint_down(self, notice: OutageNotice | None) -> None:
        """The endpoint is down (next probe scheduled), or up again (None)."""
    def close(self) -> None: ...


class Counts:
    """The numbers both displays show."""

    def __init__(self) -> None:
        self.total = 0
        self.already_done = 0
        self.done = 0
        self.running = 0
        self.failed = 0
        self.infra = 0
        self.retried = 0
        self.outage: OutageNotice | None = None
        self.tokens = 0
        self.recent: collections.deque[bool] = collections.deque(maxlen=ROLLING_WINDOW)
        self.started_at = time.monotonic()

    def finish(self, result: EpisodeResult) -> None:
        self.done += 1
        self.running = max(0, self.running - 1)
        if result.error_kind is not None:
            self.failed += 1
        if result.outcome == "infrastructure":
            self.infra += 1
        self.tokens += result.action_tokens + result.retriever_tokens
        if result.success is not None and result.outcome == "agent":
            self.recent.append(bool(result.success))

    def retry(self, result: EpisodeResult) -> None:
        self.running = max(0, self.running - 1)
        self.retried += 1
        self.tokens += result.action_tokens + result.retriever_tokens

    def status_text(self) -> str:
        return f"[yellow]{self.outage.text()}[/]" if self.outage is not None else ""

    @property
    def rolling_success(self) -> float | None:
        return sum(self.recent) / len(self.recent) if self.recent else None

    @property
    def eta_s(self) -> float | None:
        if self.done == 0:
            return None
        rate = self.done / (time.monotonic() - self.started_at)
        return (self.total - self.already_done - self.done) / rate

    def rate_text(self) -> str:
        rate = self.rolling_success
        return "-" if rate is None else f"{rate:.0%}"


class LogProgress:
    """Plain structured log lines: one when the bench starts and one per episode."""

    def __init__(self) -> None:
        self.counts = Counts()

    def start(self, total: int, already_done: int) -> None:
        self.counts.total, self.counts.already_done = total, already_done
        log.info("bench started", episodes=total, already_done=already_done,
                 to_run=total - already_done)

    def episode_started(self, label: str) -> None:
        self.counts.running += 1

    def episode_finished(self, result: EpisodeResult) -> None:
        c = self.counts
        c.finish(result)
        eta = c.eta_s
        log.info(
            "bench episode finished",
            task_id=result.task_id, seed=result.seed, filter=result.filter,
            success=result.success, steps=result.n_steps, error_kind=result.error_kind,
            done=c.already_done + c.done, total=c.total, running=c.running, failed=c.failed,
            infra=c.infra, rolling_success=c.rate_text(), tokens=c.tokens,
            eta_s=None if eta is None else round(eta),
        )

    def episode_retried(self, result: EpisodeResult) -> None:
        self.counts.retry(result)

    def endpoint_down(self, notice: OutageNotice | None) -> None:
        self.counts.outage = notice  # outage.py logs the notices itself

    def close(self) -> None:
        pass


class RichProgress:
    """A live bar on stderr. Log lines printed meanwhile appear above it."""

    def __init__(self, log_level: str = "WARNING") -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichBar

        self.counts = Counts()
        self.log_level = log_level
        self.console = Console(stderr=True)
        self.bar = RichBar(
            TextColumn("[bold]bench"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn(
                "running {task.fields[running]}  [red]failed {task.fields[failed]}[/]  "
                "infra {task.fields[infra]}  success {task.fields[rate]}  "
                "tokens {task.fields[tokens]} {task.fields[status]}"
            ),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            redirect_stderr=True,
            redirect_stdout=True,
        )
        self.task_id = self.bar.add_task("bench", total=1, running=0, failed=0, infra=0,
                                         rate="-", tokens=0, status="")

    def start(self, total: int, already_done: int) -> None:
        self.counts.total, self.counts.already_done = total, already_done
        self.bar.update(self.task_id, total=total, completed=already_done)
        self.bar.start()
        # structlog writes to the stderr it was configured with: point it at the bar's
        # redirected stderr so that log lines print above the bar, not through it.
        configure_logging(json_lines=False, level=self.log_level)

    def _refresh(self) -> None:
        c = self.counts
        self.bar.update(
            self.task_id, completed=c.already_done + c.done, running=c.running,
            failed=c.failed, infra=c.infra, rate=c.rate_text(), tokens=f"{c.tokens:,}",
            status=c.status_text(),
        )

    def episode_started(self, label: str) -> None:
        self.counts.running += 1
        self._refresh()

    def episode_finished(self, result: EpisodeResult) -> None:
        self.counts.finish(result)
        self._refresh()

    def episode_retried(self, result: EpisodeResult) -> None:
        self.counts.retry(result)
        self._refresh()

    def endpoint_down(self, notice: OutageNotice | None) -> None:
        self.counts.outage = notice
        self._refresh()

    def close(self) -> None:
        self.bar.stop()


def make_progress(rich: bool | None = None, log_level: str = "WARNING") -> Progress:
    """The bar on a terminal (or when asked), log lines otherwise."""
    if rich is None:
        rich = sys.stderr.isatty()
    return RichProgress(log_level) if rich else LogProgress()
