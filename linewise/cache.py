"""Where linewise keeps files between runs (assembled models, tokenizer data)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_root() -> Path:
    """linewise's cache folder: ``$LINEWISE_CACHE_DIR`` or the platform's user cache dir."""
    configured = os.environ.get("LINEWISE_CACHE_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_cache_dir("linewise"))
