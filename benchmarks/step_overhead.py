"""Per-step overhead without LLM time (act + observe), linewise vs BrowserGym's gym env.

Each step runs ``noop(0)`` and extracts the observation — marking, AXTree, DOM snapshot,
screenshot and the flattened text the model would read. Pages: MiniWoB++ tasks and large
real pages (Debian's python3-doc, served on localhost). BrowserGym runs first (its sync
Playwright cannot run inside an asyncio loop), with slow_mo=0.

    python benchmarks/step_overhead.py [--steps 5] [--skip-browsergym] [--playwright-trace]

``--playwright-trace`` also measures what ``linewise run --playwright-trace`` adds to a
step: the same steps with one Playwright trace chunk around each action (as
``runtime/playwright_trace.py`` records it), the extra time and the chunk's size.

Needs: apt-get install python3-doc (for the documentation pages), the `linewise` package.
Target: linewise at most 0.5x BrowserGym's per-step time.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DOCS = Path("/usr/share/doc/python3-doc/html")
MINIWOB_PAGES = ["click-test", "click-checkboxes", "book-flight", "email-inbox"]
DOC_PAGES = ["library/functions.html", "library/stdtypes.html"]
FRAME_TIMEOUT_S = 30.0


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(root: Path) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def page_urls() -> list[tuple[str, str]]:
    from linewise.runtime.tasks.miniwob_server import miniwob_html_dir

    _, miniwob_base = serve(miniwob_html_dir())
    urls = [(f"miniwob/{n}", f"{miniwob_base}miniwob/{n}.html") for n in MINIWOB_PAGES]
    if DOCS.exists():
        _, docs_base = serve(DOCS.resolve())
        urls += [(f"docs/{p}", docs_base + p) for p in DOC_PAGES]
    else:
        print(f"(no {DOCS}: apt-get install python3-doc for the large pages)")
    return urls


def time_steps(step: Callable[[], Any], steps: int) -> list[float]:
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        step()
        times.append((time.perf_counter() - started) * 1000)
    return times


def browsergym_steps(url: str, steps: int) -> tuple[list[float], int]:
    from browsergym.utils.obs import flatten_axtree_to_str

    from linewise.runtime.envs.browsergym_gym import make_env

    # Debian's Chromium for both of BrowserGym's launches, its own chat window and
    # action timeouts kept (the like-for-like baseline), slow_mo=0.
    env = make_env(
        "browsergym/openended", task_kwargs={"start_url": url}, slow_mo_ms=0,
        action_timeout_ms=None, chat="browsergym",
    )
    env.reset()
    n_lines = 0

    def step() -> None:
        nonlocal n_lines
        obs, *_ = env.step("noop(0)")
        n_lines = len(flatten_axtree_to_str(obs["axtree_object"]).splitlines())

    try:
        times = time_steps(step, steps)
    finally:
        env.close()
    return times, n_lines


async def linewise_steps(
    urls: list[tuple[str, str]], steps: int, trace_dir: Path | None = None
) -> dict[str, tuple[list[float], int]]:
    """Per-step times and line counts; with ``trace_dir``, each action inside a
    Playwright trace chunk saved there (one zip per step)."""
    from linewise.agent.action_parser import parse_action
    from linewise.agent.actions import ActionContext
    from linewise.runtime.browser.chromium import Browser
    from linewise.runtime.browser.executor import execute_action
    from linewise.runtime.browser.extraction import observe

    results: dict[str, tuple[list[float], int]] = {}
    noop = parse_action("noop(0)")
    async with Browser() as browser:
        for name, url in urls:
            session = await browser.new_session()
            await session.page.goto(url)
            # A generous frame deadline: on a busy machine marking a 20,000-line page can
            # pass the run's 2 s, and a skipped frame would make a step look cheap.
            await observe(session, frame_timeout_s=FRAME_TIMEOUT_S)  # first visit: marking
            # initialises its counters
            tracing = session.context.tracing
            if trace_dir is not None:
                await tracing.start(screenshots=True, snapshots=True)
            times = []
            n_lines = 0
            for index in range(steps):
                started = time.perf_counter()
                if trace_dir is not None:
                    await tracing.start_chunk(title=str(noop))
                await execute_action(noop, ActionContext(session))
                if trace_dir is not None:
                    chunk = trace_dir / name.replace("/", "_") / f"step-{index:03d}.zip"
                    chunk.parent.mkdir(parents=True, exist_ok=True)
                    await tracing.stop_chunk(path=chunk)
                obs = await observe(session, frame_timeout_s=FRAME_TIMEOUT_S)
                times.append((time.perf_counter() - started) * 1000)
                n_lines = len(obs.lines)
            results[name] = (times, n_lines)
            await session.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--skip-browsergym", action="store_true")
    parser.add_argument("--playwright-trace", action="store_true",
                        help="also measure the per-step cost of --playwright-trace")
    args = parser.parse_args()
    urls = page_urls()

    ours = asyncio.run(linewise_steps(urls, args.steps))
    if args.playwright_trace:
        print_trace_cost(urls, ours, args.steps)
    theirs: dict[str, tuple[list[float], int]] = {}
    if not args.skip_browsergym:
        for name, url in urls:
            theirs[name] = browsergym_steps(url, args.steps)

    header = f"{'page':36} {'lines':>7} {'linewise ms':>12} {'browsergym ms':>14} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    ratios = []
    for name, _ in urls:
        times, lines = ours[name]
        mine = statistics.median(times)
        if name in theirs:
            other_times, other_lines = theirs[name]
            other = statistics.median(other_times)
            ratio = mine / other
            ratios.append(ratio)
            print(f"{name:36} {lines:>7} {mine:>12.0f} {other:>14.0f} {ratio:>6.2f}"
                  f"   (browsergym lines: {other_lines})")
        else:
            print(f"{name:36} {lines:>7} {mine:>12.0f}")
    if ratios:
        print(f"\nmedian per-step time ratio linewise/browsergym: {statistics.median(ratios):.2f}"
              f" (worst {max(ratios):.2f}); target <= 0.50")


def print_trace_cost(
    urls: list[tuple[str, str]], plain: dict[str, tuple[list[float], int]], steps: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        trace_dir = Path(folder)
        traced = asyncio.run(linewise_steps(urls, steps, trace_dir))
        header = (f"{'page':36} {'lines':>7} {'plain ms':>9} {'traced ms':>10} "
                  f"{'extra ms':>9} {'KB/step':>8}")
        print(header)
        print("-" * len(header))
        for name, _ in urls:
            times, lines = plain[name]
            with_trace = statistics.median(traced[name][0])
            without = statistics.median(times)
            chunks = list((trace_dir / name.replace("/", "_")).glob("*.zip"))
            size_kb = sum(c.stat().st_size for c in chunks) / max(len(chunks), 1) / 1024
            print(f"{name:36} {lines:>7} {without:>9.0f} {with_trace:>10.0f} "
                  f"{with_trace - without:>9.0f} {size_kb:>8.0f}")
    print()


if __name__ == "__main__":
    main()
