"""Which of linewise's Playwright calls a Playwright trace records (``--playwright-trace``).

A step's trace chunk must read as the step's action written with Playwright: the call
that acts (``ElementHandle.click``, ``Page.goto``…), not the ten calls of linewise's own
around it (finding the element the model observed, measuring its box, watching for a
popup, waiting for the page to settle), among which a Playwright user could not find
the click. So the runtime makes everything it does for an action ``untraced`` and only
the action's own work ``traced`` again; inside the action, a lookup is untraced once
more.

Playwright's tracer leaves out calls its client marks internal (a call without an API
name, as the client's own helper calls are). Playwright 1.44's Python client has no
public way to mark a call so (``tracing.group`` came in 1.49), so this sets the
client's API zone (``Connection._api_zone``, a context variable) as its own
``wrap_api_call(is_internal=True)`` does. On an object without that zone (another
client version, or no Playwright object) both are no-ops: the calls are traced as
before, which loses clarity, never a call (tests/cli/test_show_trace.py checks that a
click's chunk holds the click alone).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any

_INTERNAL: dict[str, Any] = {"apiName": "", "frames": []}
"""The zone of a call the client itself makes: no API name, so marked internal."""


def _zone(owner: object) -> ContextVar[Any] | None:
    """The API-zone variable of the Playwright connection ``owner`` (a page, a
    context, an element handle) belongs to."""
    impl = getattr(owner, "_impl_obj", owner)
    zone = getattr(getattr(impl, "_connection", None), "_api_zone", None)
    return zone if isinstance(zone, ContextVar) else None


@contextmanager
def _in_zone(owner: object, value: dict[str, Any] | None) -> Iterator[None]:
    zone = _zone(owner)
    if zone is None:
        yield
        return
    token = zone.set(value)
    try:
        yield
    finally:
        zone.reset(token)


def untraced(owner: object) -> AbstractContextManager[None]:
    """Playwright calls made inside (on ``owner``'s connection) are left out of traces."""
    return _in_zone(owner, _INTERNAL)


def traced(owner: object) -> AbstractContextManager[None]:
    """Playwright calls made inside are traced, named as Playwright names them, even
    within ``untraced``: the action's own work."""
    return _in_zone(owner, None)
