"""How a bench's episodes run (``BenchOptions``), apart from the backends that run them:
``linewise bench --help`` and ``linewise improve --help`` state its default episode
timeout without importing what runs episodes (Playwright, the model clients)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BenchOptions:
    """How the episodes run (not what they are)."""

    concurrency: int = 1
    episode_timeout_s: float = 600.0
    close_grace_s: float = 30.0
    """Beyond the episode's own timeout: time to close its context before it is
    abandoned (a hung page can make even closing hang)."""
