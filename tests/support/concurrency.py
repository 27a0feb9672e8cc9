"""Measuring how many requests a test server handles at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class InFlight:
    """Counts requests inside ``track()``; ``peak`` is the most at the same time."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

    @contextmanager
    def track(self) -> Iterator[None]:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            yield
        finally:
            with self._lock:
                self.active -= 1
