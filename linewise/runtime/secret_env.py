"""Secret values kept inside this process, and environments for child processes without them.

A secret's value comes from its environment variable (``--secret NAME=ENV_VAR``, a
task's ``secrets:``) or from a goal (``{{secret:VALUE}}``, which never goes into the
environment but is kept here by a variable name of its own): ``SecretStore.from_specs``
reads every value through this module, which notes which variables held one.

The processes linewise starts need none of them and must hold none of them: Chromium
(a renderer that a page compromises could read its environment), the Playwright driver,
BrowserGym's driver and the local model server. ``child_environment`` is this process's
environment without any variable that held a secret's value, holds one (a copy of a
password in another variable) or holds an API key;
``scrubbed_environ`` takes those variables out of ``os.environ`` while a library that
copies it (Playwright's driver start) starts its process, and puts them back.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from linewise.runtime.redaction import API_KEY_ENV_VARS

_values: dict[str, str] = {}
"""Values kept by variable name that no environment holds: a goal's secrets, and what a
worker process was handed."""
_read: dict[str, str] = {}
"""Values read from a variable of the environment: their variables are kept out of
child processes."""
_lock = threading.RLock()
_scrubs = 0
_taken: dict[str, str] = {}


def remember(env: str, value: str) -> None:
    """Keep ``value`` as the value of variable ``env`` for this process."""
    with _lock:
        _values[env] = value


def remember_all(values: Mapping[str, str]) -> None:
    for env, value in values.items():
        remember(env, value)


def value_of(env: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of variable ``env`` in ``environ`` (``os.environ``), else the one kept
    under its name (a goal's secret; a variable taken out of ``os.environ`` while a
    child process starts); "" when there is none."""
    value = (os.environ if environ is None else environ).get(env, "")
    with _lock:
        if value:
            _read[env] = value
            return value
        return _taken.get(env) or _values.get(env, "")


def kept() -> dict[str, str]:
    """Every value read or kept, by variable name (for a worker process of the run)."""
    with _lock:
        return {**_read, **_values}


def forget() -> None:
    """Forget every kept value (tests)."""
    with _lock:
        _values.clear()
        _read.clear()


CONTAINED = 6
"""A value this long is looked for inside other variables too (shorter ones could be
part of a ``PATH``)."""


def _sensitive(name: str, value: str, values: set[str]) -> bool:
    return name in _values or name in _read or name in API_KEY_ENV_VARS or any(
        v == value or (len(v) >= CONTAINED and v in value) for v in values)


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (``os.environ``) without the variables that name or hold a secret's
    value, or hold an API key: what a child process is given."""
    source = os.environ if environ is None else environ
    with _lock:
        values = {v for v in (*_values.values(), *_read.values()) if v}
        return {k: v for k, v in source.items() if not _sensitive(k, v, values)}


@contextmanager
def scrubbed_environ() -> Iterator[None]:
    """``os.environ`` without the variables ``child_environment`` leaves out, for as
    long as the block runs (for libraries that copy ``os.environ`` into the process they
    start); nested and concurrent blocks share one scrub, undone by the last to leave."""
    global _scrubs
    with _lock:
        if _scrubs == 0:
            keep = child_environment()
            for name in [k for k in os.environ if k not in keep]:
                _taken[name] = os.environ.pop(name)
        _scrubs += 1
    try:
        yield
    finally:
        with _lock:
            _scrubs -= 1
            if _scrubs == 0:
                os.environ.update(_taken)
                _taken.clear()
