"""What the request policy costs a page load: the same page, with many sub-resources,
loaded with the policy (its route and its proxy) and without. Run by hand; figures go
to benchmarks/NOTES.md.

    python benchmarks/policy_overhead.py [--resources 100] [--loads 10]

The page (served on loopback) holds ``--resources`` images, scripts and fetches to the
same server; each load is timed from ``goto`` to the ``load`` event with every fetch
answered. The per-request overhead is the difference of the medians divided by the
number of requests.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from linewise.runtime.browser.chromium import Browser, BrowserConfig
from linewise.runtime.browser.guard import NavigationGuard
from linewise.runtime.browser.navigation import NavigationPolicy
from linewise.settings import NavigationSettings

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def site(root: Path, resources: int) -> None:
    images = "".join(f'<img src="img/{i}.png" width=1 height=1>' for i in range(resources // 2))
    fetches = resources - resources // 2
    (root / "img").mkdir()
    for i in range(resources // 2):
        (root / "img" / f"{i}.png").write_bytes(PNG)
    (root / "data.json").write_text('{"ok": true}')
    (root / "page.html").write_text(
        f"<!doctype html><title>load</title><body>{images}<script>"
        f"window.fetched = Promise.all(Array.from({{length: {fetches}}}, (_, i) => "
        "fetch('data.json?' + i).then(r => r.json())));</script></body>")


async def timed_loads(browser: Browser, url: str, loads: int, policy: bool) -> list[float]:
    times = []
    for _ in range(loads):
        guard = (NavigationGuard(NavigationPolicy.for_task(
            NavigationSettings(), url, devtools_port=browser.devtools_port)) if policy else None)
        session = await browser.new_session(guard)
        try:
            started = time.perf_counter()
            await session.page.goto(url, wait_until="load")
            await session.page.evaluate("window.fetched")
            times.append(time.perf_counter() - started)
        finally:
            await session.close()
    return times


async def main(resources: int, loads: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        site(root, resources)
        server = ThreadingHTTPServer(("127.0.0.1", 0),
                                     functools.partial(_Quiet, directory=str(root)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/page.html"
        async with Browser(BrowserConfig(headless=True)) as browser:
            await timed_loads(browser, url, 1, True)  # warm both paths once
            await timed_loads(browser, url, 1, False)
            with_policy = await timed_loads(browser, url, loads, True)
            without = await timed_loads(browser, url, loads, False)
        server.shutdown()
    requests = resources + 1
    a, b = statistics.median(with_policy), statistics.median(without)
    print("| page | requests | loads | with the policy (median) | without | per request |")
    print("|---|---|---|---|---|---|")
    print(f"| {resources} sub-resources | {requests} | {loads} | {a * 1000:.0f} ms | "
          f"{b * 1000:.0f} ms | {(a - b) / requests * 1000:.2f} ms |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resources", type=int, default=100)
    parser.add_argument("--loads", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.resources, args.loads))
