"""The JavaScript the runtime evaluates in pages, loaded once as package data."""

from __future__ import annotations

import pkgutil
from functools import cache

from linewise.errors import ObservationError


@cache
def browsergym_js(name: str) -> str:
    data = pkgutil.get_data("browsergym.core", f"javascript/{name}")
    if data is None:  # pragma: no cover - broken browsergym-core install
        raise ObservationError(f"browsergym-core is missing javascript/{name}")
    return data.decode("utf-8")


@cache
def own_js(name: str) -> str:
    """A script shipped with linewise in ``runtime/browser/js/``."""
    data = pkgutil.get_data(__package__ or "linewise.runtime.browser", f"js/{name}")
    if data is None:  # pragma: no cover - broken install
        raise ObservationError(f"linewise is missing js/{name}")
    return data.decode("utf-8")
