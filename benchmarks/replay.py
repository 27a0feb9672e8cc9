"""Replay measured: solved episodes run again with no model, on the same pages and on
pages that changed. Run by hand; figures go to benchmarks/NOTES.md.

Two measurements:

- ``solved RUN_DIR``: every successful episode of a run or bench folder (e.g. the
  embedded model's MiniWoB++ sample) replayed with no model (``linewise replay
  --no-model``) at the same seeds: the replays' success rate with its standard error,
  the model calls they made, and the wall time of each replay against its recorded run.

      python benchmarks/replay.py solved /work/runs/s21/mw10 --out /work/runs/s21/replay10

- ``docs-variants``: the navigation tasks of tasks/docs-agent.yaml solved by the
  scripted oracle (benchmarks/docs_agent.py) on the documentation pages as installed,
  then replayed on the same pages changed two ways a live site changes: a banner
  inserted at the top of the body (every element id shifts) and the page's table of
  contents in reverse order. With ``--heal`` a replay that does not fit is healed by the
  embedded model (or ``--base-url``/``--model``); without, it ends ``diverged``.

      python benchmarks/replay.py docs-variants --out /work/runs/s21/docs-variants
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import io
import math
import statistics
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import lxml.html

import linewise
from linewise.records import EpisodeSummary
from linewise.runtime.replay.program import load_programs
from linewise.runtime.trace import read_summary
from linewise.settings import EndpointSettings, LinewiseSettings

sys.path.insert(0, str(Path(__file__).parent))
from docs_agent import DOCS, DocsOracle, load_tasks, task_kind


def rate(successes: int, n: int) -> str:
    if n == 0:
        return "– (0/0)"
    p = successes / n
    return f"{100 * p:.1f}% ± {100 * math.sqrt(p * (1 - p) / n):.1f} ({successes}/{n})"


def replay_table(replays: Sequence[EpisodeSummary], recorded: dict[str, EpisodeSummary]
                 ) -> str:
    ok = sum(bool(s.success) for s in replays)
    steps = sum(s.n_steps for s in replays)
    calls = sum(s.tokens.llm_calls for s in replays)
    ratios = [s.time.wall_s / recorded[s.task_id].time.wall_s for s in replays
              if s.task_id in recorded and recorded[s.task_id].time.wall_s > 0]
    healed = sum(s.outcome == "healed" for s in replays)
    diverged = [f"{s.task_id}: {s.replay.divergence} ({s.replay.detail[:80]})"
                for s in replays if s.replay is not None and s.replay.divergence]
    lines = [
        "| replays | success | healed | model calls | per step | wall vs recorded (median, max) |",
        "|---|---|---|---|---|---|",
        f"| {len(replays)} | {rate(ok, len(replays))} | {healed} | {calls} | "
        f"{calls / steps if steps else 0:.3f} | "
        + (f"{statistics.median(ratios):.2f}×, {max(ratios):.2f}× |" if ratios else "– |"),
    ]
    return "\n".join([*lines, *(["", *diverged] if diverged else [])])


async def solved(run_dir: Path, out: Path) -> None:
    programs = load_programs(run_dir)
    recorded = {p.task_id: read_summary(p.source) for p in programs}
    print(f"{len(programs)} solved episodes in {run_dir}", file=sys.stderr)
    replays = await linewise.replay(run_dir, heal=False, out_dir=out)
    print(replay_table(replays, recorded))


# ------------------------------------------------------------------ page variants


def insert_banner(tree: Any) -> None:
    body = tree.find(".//body")
    banner = lxml.html.fragment_fromstring(
        '<div role="banner" style="background:#ffd;padding:6px">'
        "<strong>Help us improve this documentation.</strong> "
        '<a href="#survey">Take the two-minute survey</a> '
        '<button type="button">Not now</button> <a href="#top">Back to top</a></div>')
    body.insert(0, banner)


def reverse_contents(tree: Any) -> None:
    """The first table of contents (Sphinx's sidebar, Apache's quick view and the
    like) with its top-level entries in reverse order."""
    for path in ('//div[contains(@class,"sphinxsidebar")]//ul', '//ul[@id="toc"]',
                 '//div[@id="quickview"]//ul', '//div[contains(@class,"toc")]//ul',
                 "//ul"):
        found = tree.xpath(path)
        if found:
            ul = found[0]
            items = [child for child in ul if child.tag == "li"]
            for item in items:
                ul.remove(item)
            for item in reversed(items):
                ul.append(item)
            return


VARIANTS: dict[str, Callable[[Any], None] | None] = {
    "banner": insert_banner, "reordered-contents": reverse_contents,
}


class VariantServer:
    """/usr/share/doc on a fixed local port, its HTML pages passed through a variant."""

    def __init__(self, root: Path) -> None:
        self.variant: Callable[[Any], None] | None = None
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def send_head(self) -> Any:
                path = Path(self.translate_path(self.path))
                if server.variant is None or path.suffix != ".html" or not path.is_file():
                    return super().send_head()
                tree = lxml.html.parse(str(path))
                server.variant(tree.getroot())
                body = lxml.html.tostring(tree, encoding="utf-8", doctype="<!DOCTYPE html>")
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return io.BytesIO(body)

        handler = functools.partial(Handler, directory=str(root))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/"

    @contextlib.contextmanager
    def running(self) -> Iterator[VariantServer]:
        self._thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()


class WideOracle:
    """The docs oracle as an in-process model that reads whole pages."""

    model = "oracle"
    context_tokens = 1_000_000

    def __init__(self, oracle: DocsOracle) -> None:
        self.oracle = oracle

    async def complete(self, messages: list[dict[str, Any]], **params: Any
                       ) -> linewise.Completion:
        return linewise.Completion(text=self.oracle(messages))


async def docs_variants(out: Path, heal: bool, settings: LinewiseSettings) -> None:
    server = VariantServer(DOCS)
    with server.running():
        tasks = [t for t in load_tasks(server.url()) if task_kind(t) == "navigate"]
        oracle = WideOracle(DocsOracle(tasks))
        recorded = await linewise.run(tasks, model=oracle, filter="none",
                                      settings=settings, out_dir=out / "recorded")
        solved = {s.task_id: s for s in recorded if s.success}
        print(f"the oracle solved {len(solved)} of {len(tasks)} navigations", file=sys.stderr)
        for name, variant in VARIANTS.items():
            server.variant = variant
            replays = []
            for summary in solved.values():
                assert summary.directory is not None
                replays += await linewise.replay(summary.directory, heal=heal,
                                                 settings=settings, out_dir=out / name)
            print(f"\n{name}\n")
            print(replay_table(replays, solved))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("solved", help="replay the solved episodes of a run or bench folder")
    one.add_argument("run_dir", type=Path)
    one.add_argument("--out", type=Path, required=True)
    two = sub.add_parser("docs-variants", help="oracle navigations replayed on changed pages")
    two.add_argument("--out", type=Path, required=True)
    two.add_argument("--heal", action="store_true",
                     help="heal with the embedded model (or --base-url/--model)")
    two.add_argument("--base-url")
    two.add_argument("--model")
    args = parser.parse_args()
    linewise_settings = LinewiseSettings().resolved()
    if getattr(args, "base_url", None):
        linewise_settings = linewise_settings.model_copy(update={"action": EndpointSettings(
            base_url=args.base_url, model=args.model or "model")})
    linewise_settings = linewise_settings.model_copy(update={"screenshots": False})
    if args.what == "solved":
        asyncio.run(solved(args.run_dir, args.out))
    else:
        asyncio.run(docs_variants(args.out, args.heal, linewise_settings))


if __name__ == "__main__":
    main()
