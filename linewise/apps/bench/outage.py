"""Riding out a model endpoint outage: the bench pauses, probes, and carries on.

Every episode's ending is shown to ``EndpointWatch.record``. After
``OutageSettings.failures_to_pause`` endings in a row on a model endpoint fault, the
endpoint counts as down: the bench starts no new episode (``wait_until_up`` blocks),
and one probe task asks the endpoint a cheap question, waiting longer each time
(exponential, with jitter so that many benches do not probe in step). The first answer
lifts the pause. Once the endpoint has been down for ``max_outage_s`` the watch gives
up: ``wait_until_up`` returns False and the bench stops starting episodes, leaving the
rest for ``--resume``. A probe that is refused (401/403) is kept in ``refused``: the
run cannot go on at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import structlog

from linewise.apps.bench.results import EpisodeResult
from linewise.errors import EndpointRefused, EndpointUnreachable
from linewise.settings import OutageSettings

log = structlog.get_logger(__name__)

Probe = Callable[[], Awaitable[None]]
"""Returns when the endpoint answers; raises ``EndpointUnreachable`` when it does not."""


@dataclass(frozen=True)
class OutageNotice:
    """What the progress display shows while the endpoint is down."""

    since: datetime
    next_probe_s: float
    probes: int

    def text(self) -> str:
        return (f"model endpoint down since {self.since:%H:%M:%S}, "
                f"next probe in {self.next_probe_s:.0f} s")


OutageHook = Callable[[OutageNotice | None], None]
"""Told of every probe scheduled during an outage, and ``None`` when it ends."""


class EndpointWatch:
    """Counts endpoint faults, pauses the bench during an outage and probes until it ends."""

    def __init__(
        self, settings: OutageSettings, probe: Probe | None, on_change: OutageHook | None = None
    ) -> None:
        """``probe`` None: the model is not behind an endpoint; nothing ever pauses."""
        self.settings = settings
        self.probe = probe
        self.on_change = on_change
        self.consecutive = 0
        self.gave_up = False
        self.refused: EndpointRefused | None = None
        self.outages = 0
        self._up = asyncio.Event()
        self._up.set()
        self._prober: asyncio.Task[None] | None = None
        # When the endpoint last stopped serving episodes: a probe that answers lifts a
        # pause, but only an episode the model served ends the outage, so an endpoint
        # that lists its models and fails every chat still runs out the clock.
        self._down_since: tuple[datetime, float] | None = None

    @property
    def down(self) -> bool:
        return not self._up.is_set()

    def record(self, result: EpisodeResult) -> None:
        """Count one episode ending: a model fault in a row more, or an answer that
        shows the endpoint works."""
        if result.infra_kind == "model":
            self.consecutive += 1
            if (self.probe is not None and not self.down and not self.gave_up
                    and self.consecutive >= self.settings.failures_to_pause):
                self._pause()
        elif result.outcome in ("agent", "assisted", "hooked"):
            self.consecutive = 0
            self._down_since = None

    async def wait_until_up(self) -> bool:
        """Wait out an outage; False when the bench must stop (outage too long, or the
        endpoint refused us)."""
        await self._up.wait()
        return not self.gave_up and self.refused is None

    async def close(self) -> None:
        if self._prober is not None:
            self._prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prober

    def _pause(self) -> None:
        self._up.clear()
        self.outages += 1
        self._prober = asyncio.get_running_loop().create_task(self._probe_until_up())

    async def _probe_until_up(self) -> None:
        assert self.probe is not None
        if self._down_since is None:
            self._down_since = (datetime.now(), time.monotonic())
        since, started = self._down_since
        ceiling = self.settings.probe_initial_s
        probes = 0
        log.warning("model endpoint down: no new episode starts until it answers",
                    failures_in_a_row=self.consecutive)
        try:
            while True:
                left = self.settings.max_outage_s - (time.monotonic() - started)
                if left <= 0:
                    self.gave_up = True
                    log.error("model endpoint still down: the bench stops (resumable)",
                              down_s=round(time.monotonic() - started), since=f"{since:%X}")
                    return
                wait = min(left, random.uniform(ceiling / 2, ceiling))
                notice = OutageNotice(since, wait, probes)
                log.warning(notice.text(), probes=probes)
                if self.on_change is not None:
                    self.on_change(notice)
                await asyncio.sleep(wait)
                probes += 1
                try:
                    await self.probe()
                except EndpointRefused as exc:
                    self.refused = exc
                    log.error("model endpoint refused the probe: the bench stops", error=str(exc))
                    return
                except EndpointUnreachable as exc:
                    log.info("probe: model endpoint still down", error=str(exc)[:200])
                    ceiling = min(self.settings.probe_max_s, ceiling * 2)
                    continue
                log.warning("model endpoint answers again: the bench carries on",
                            down_s=round(time.monotonic() - started, 1), probes=probes)
                self.consecutive = 0
                return
        finally:
            self._up.set()
            if self.on_change is not None:
                self.on_change(None)
