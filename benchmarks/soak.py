"""Soak: many episodes in one bench; does memory stay flat?

One ``run_bench`` (local backend, one Chromium, a context per episode) runs N episodes
at concurrency C with a scripted model behind real HTTP (``ScriptedChatServer``, in a
child process so that its request log does not count as the runtime's memory). The
tasks rotate over MiniWoB++ click-test, click-button, enter-text and the local pages
of ``linewise.testing.bench_pages`` (a plain page, one with a refused iframe, one with
an alert loop): the paths where pages, frames, dialogs and listeners could be left
behind.

Every ``--every`` episodes it samples the resident memory of this process (the
runtime) and of every Chromium process below it (browser, zygotes, GPU, network,
renderers), from /proc, as an episode ends while C-1 others run (the number of open
pages then is the same at every sample). "Start" is after the warm-up (``--warmup``
episodes: Chromium launched, caches and imports warm); "end" is the last sample while
C episodes still run, C-1 episodes before the last one ends. It prints start,
end, growth, the growth per 100 episodes fitted over every sample after the warm-up,
and episodes per minute, and checks the fitted growth from start to end (the slope times
the episodes between them) against ``--max-growth`` (MiB, each of
runtime RSS and Chromium PSS). Exit 1 when a bound is passed.

    python benchmarks/soak.py [--episodes 200] [--concurrency 4] [--every 10]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from linewise.apps.bench.driver import run_bench
from linewise.apps.bench.local import BenchOptions
from linewise.apps.bench.plan import EpisodeSpec, expand
from linewise.apps.bench.progress import LogProgress
from linewise.apps.bench.results import EpisodeResult
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.log import configure_logging
from linewise.runtime.tasks.schema import AnyTask, MiniWoBTask, SuccessCheck, WebTask
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import ScriptedChatServer, StaticServer
from linewise.testing.bench_pages import GO_GOAL, go_then_report, write_pages
from linewise.testing.processes import Memory, chromium_memory, memory_of


def serve_model(urls: Any, stop: Any) -> None:
    """The child process: the scripted model until ``stop`` is set or the soak is gone
    (killed: a daemon child is only ended by a normal exit)."""
    parent = os.getppid()
    with ScriptedChatServer(go_then_report) as server:
        urls.put(server.base_url)
        while not stop.wait(1.0) and os.getppid() == parent:
            pass


def tasks(pages: StaticServer) -> list[AnyTask]:
    web = [WebTask(id=name, url=pages.url(f"{name}.html"), goal=GO_GOAL, max_steps=4,
                   success=SuccessCheck(answer_contains="done"))
           for name in ("plain", "refused-iframe", "alert-loop")]
    miniwob = [MiniWoBTask(miniwob=name, seed=seed, max_steps=4) for name, seed in
               (("click-test", 0), ("click-button", 0), ("enter-text", 0))]
    return [miniwob[0], web[0], miniwob[1], web[1], miniwob[2], web[2]]


def specs_for(episodes: int, pages: StaticServer) -> list[EpisodeSpec]:
    listed = tasks(pages)
    return expand(listed, ["none"], -(-episodes // len(listed)))[:episodes]


@dataclass
class Sample:
    episodes: int
    seconds: float
    runtime: Memory
    chromium: Memory


class SamplingProgress(LogProgress):
    """Samples memory every ``every`` finished episodes (and after the first)."""

    def __init__(self, every: int, episodes: int, concurrency: int, warmup: int,
                 trace_top: int = 0) -> None:
        super().__init__()
        self.every = every
        self.warmup = warmup
        self.trace_top = trace_top
        self.snapshots: list[tracemalloc.Snapshot] = []
        self.full_until = episodes - concurrency
        """Up to here every episode finishes with C-1 others running: samples compare."""
        self.finished = 0
        self.started = time.monotonic()
        self.samples: list[Sample] = []
        self.failures: list[EpisodeResult] = []

    def sample(self) -> None:
        self.samples.append(Sample(self.finished, time.monotonic() - self.started,
                                   memory_of([os.getpid()]), chromium_memory(os.getpid())))
        if self.trace_top and (self.finished == self.full_until or (
                not self.snapshots and self.finished >= self.warmup)):
            self.snapshots.append(tracemalloc.take_snapshot())

    def growing_allocations(self) -> list[str]:
        """Where Python memory grew most between the start and the end (``--tracemalloc``)."""
        if len(self.snapshots) < 2:
            return []
        diff = self.snapshots[-1].compare_to(self.snapshots[0], "traceback")
        lines = []
        for stat in diff[:self.trace_top]:
            frames = " <- ".join(f"{Path(f.filename).name}:{f.lineno}"
                                 for f in list(stat.traceback)[-1:-5:-1])
            lines.append(f"{stat.size_diff / 1024:+9.0f} KiB {stat.count_diff:+7d} blocks  "
                         f"{frames}")
        return lines

    def episode_finished(self, result: EpisodeResult) -> None:
        super().episode_finished(result)
        self.finished += 1
        if not result.success:
            self.failures.append(result)
        at_full_load = self.finished <= self.full_until
        if self.finished == 1 or self.finished == self.full_until or (
                at_full_load and self.finished % self.every == 0):
            self.sample()


def slope_per_100(points: list[tuple[int, float]]) -> float:
    """Least-squares growth per 100 episodes."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var == 0:
        return 0.0
    return 100 * sum((x - mean_x) * (y - mean_y) for x, y in points) / var


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--every", type=int, default=10, help="sample every N episodes")
    parser.add_argument("--warmup", type=int, default=20, help="episodes before 'start'")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="N",
                        help="also list the N Python allocation sites that grew most "
                        "(slows the runtime down and adds tracemalloc's own records to "
                        "its RSS: neither figure nor bound holds then)")
    parser.add_argument("--max-growth", type=float, default=64.0, metavar="MIB",
                        help="bound on the growth from start to end (default 64 MiB)")
    args = parser.parse_args()
    configure_logging(json_lines=False, level="WARNING")

    context = multiprocessing.get_context("spawn")
    urls, stop = context.Queue(), context.Event()
    model = context.Process(target=serve_model, args=(urls, stop), daemon=True)
    model.start()
    base_url = urls.get(timeout=60)
    endpoint = EndpointSettings(base_url=base_url, model="scripted", max_in_flight=8)
    settings = LinewiseSettings(action=endpoint, retriever=endpoint, screenshots=False)
    if args.tracemalloc:
        tracemalloc.start(6)
    progress = SamplingProgress(args.every, args.episodes, args.concurrency, args.warmup,
                                args.tracemalloc)
    try:
        with tempfile.TemporaryDirectory() as site, tempfile.TemporaryDirectory() as out:
            write_pages(Path(site))
            with StaticServer(Path(site)) as pages:
                specs = specs_for(args.episodes, pages)
                started = time.monotonic()
                outcome = asyncio.run(run_bench(
                    specs, settings, BrowserConfig(), Path(out),
                    BenchOptions(concurrency=args.concurrency, episode_timeout_s=120),
                    progress=progress, argv=["soak"],
                ))
                wall = time.monotonic() - started
    finally:
        stop.set()
        model.join(10)

    samples = progress.samples
    warm = [s for s in samples if s.episodes >= args.warmup] or samples
    first, start, end = samples[0], warm[0], samples[-1]
    results = outcome.results
    print(f"{len(results)} episodes at concurrency {args.concurrency} in {wall:.0f} s: "
          f"{60 * len(results) / wall:.1f} episodes/min; "
          f"{sum(bool(r.success) for r in results)} successes, "
          f"{sum(r.outcome == 'infrastructure' for r in results)} infrastructure endings")
    print(f"{'':22}{'first':>9}{'start':>9}{'end':>9}{'growth':>9}{'per 100':>9}  (MiB)")
    print(f"{'':22}{'ep ' + str(first.episodes):>9}{'ep ' + str(start.episodes):>9}"
          f"{'ep ' + str(end.episodes):>9}")
    breaches = []
    rows: list[tuple[str, Any]] = [
        ("runtime RSS", lambda s: s.runtime.rss_mib),
        ("Chromium RSS (sum)", lambda s: s.chromium.rss_mib),
        ("Chromium PSS", lambda s: s.chromium.pss_mib),
    ]
    for label, value in rows:
        growth = value(end) - value(start)
        slope = slope_per_100([(s.episodes, value(s)) for s in warm])
        print(f"{label:22}{value(first):9.0f}{value(start):9.0f}{value(end):9.0f}"
              f"{growth:+9.0f}{slope:+9.1f}")
        # The bound is on the trend, not on two samples: which pages Chromium holds at
        # the moment of a sample moves its PSS by tens of MiB either way.
        trend = slope * (end.episodes - start.episodes) / 100
        if (label != "Chromium RSS (sum)" and trend > args.max_growth
                and not args.tracemalloc):
            breaches.append(f"{label} grew {trend:.0f} MiB (fitted trend from episode "
                            f"{start.episodes} to {end.episodes}) > {args.max_growth:g} MiB")
    print("runtime RSS by episode: " + " ".join(
        f"{s.episodes}:{s.runtime.rss_mib:.0f}" for s in samples))
    print("Chromium PSS by episode: " + " ".join(
        f"{s.episodes}:{s.chromium.pss_mib:.0f}" for s in samples))
    print(f"Chromium processes: {start.chromium.processes} at start, "
          f"{end.chromium.processes} at end")
    for result in progress.failures[:5]:
        print(f"failed: {result.task_id} seed {result.seed}: {result.termination} "
              f"{result.error or ''}"[:200])
    for line in progress.growing_allocations():
        print(f"grew: {line}")
    for breach in breaches:
        print(f"BOUND PASSED: {breach}")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
