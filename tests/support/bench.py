"""A bench progress reporter that keeps what the bench reported, for assertions."""

from __future__ import annotations

from linewise.apps.bench.outage import OutageNotice
from linewise.apps.bench.progress import LogProgress
from linewise.apps.bench.results import EpisodeResult


class RecordingProgress(LogProgress):
    """The log lines, every outage notice and every in-bench rerun the bench reported."""

    def __init__(self) -> None:
        super().__init__()
        self.notices: list[OutageNotice | None] = []
        self.retried: list[EpisodeResult] = []

    def endpoint_down(self, notice: OutageNotice | None) -> None:
        super().endpoint_down(notice)
        self.notices.append(notice)

    def episode_retried(self, result: EpisodeResult) -> None:
        super().episode_retried(result)
        self.retried.append(result)
