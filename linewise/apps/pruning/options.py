"""How ``linewise prune`` prunes (``PruneOptions``), apart from the pipeline: the
``prune`` and ``improve`` helps state its defaults without importing the pipeline and
the model clients it runs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PruneOptions:
    repeats: int = 3
    mode: str = "hybrid"
    pass_rate: tuple[float, float] | None = None
    include_failed: bool = False
    limit: int | None = None
    concurrency: int = 2
    extract_temperature: float = 0.7
    max_obs_tokens: int = 3000
    build_retries: int = 2
    candidates: int = 3
    rewrite_temperature: float = 0.8
    extractor_base_url: str | None = None
    extractor_model: str | None = None
