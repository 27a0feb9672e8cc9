"""What one Chromium costs to start: the full browser in headless mode against Chromium's
headless shell, launched as linewise launches them (its flags, its driver). Run by hand
on a quiet machine; figures go to benchmarks/NOTES.md.

    python benchmarks/browser_launch.py                   # both, six launches each
    python benchmarks/browser_launch.py --runs 10 /opt/chrome/chrome

Each launch starts the browser, opens a session, loads a small page, reads its
observation and closes everything. Prints, per executable, the median wall time of a
launch and the CPU seconds it cost this process and its children (Chromium, the driver).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time

from linewise.runtime.browser.chromium import Browser, BrowserConfig
from linewise.runtime.browser.extraction import observe

PAGE = "data:text/html,<h1>Sign in</h1><label>Name <input></label><button>Go</button>"
DEFAULT = ("/usr/bin/chromium", "/usr/bin/chromium-headless-shell")


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def _launch_once(executable: str) -> float:
    started = time.perf_counter()
    browser = await Browser(BrowserConfig(chromium=executable)).start()
    try:
        session = await browser.new_session()
        await session.page.goto(PAGE)
        await observe(session, screenshot=False)
        await session.close()
    finally:
        await browser.close()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("executables", nargs="*", default=list(DEFAULT))
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    for executable in args.executables:
        if not os.access(executable, os.X_OK):
            print(f"{executable}: not installed")
            continue
        cpu = _cpu_seconds()
        walls = [asyncio.run(_launch_once(executable)) for _ in range(args.runs)]
        per_launch = (_cpu_seconds() - cpu) / args.runs
        print(f"{executable}: {statistics.median(walls):.2f} s a launch (median of "
              f"{args.runs}), {per_launch:.2f} CPU-s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
