"""``linewise show-trace STEP.zip``: a ``--playwright-trace`` chunk in Playwright's trace
viewer, on linewise's Chromium (``runtime/debug/show_trace.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from linewise.cli.commands import summary
from linewise.runtime.debug.show_trace import show_trace


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "show-trace",
        help=summary("show-trace"),
    )
    parser.add_argument("traces", nargs="+", type=Path, metavar="STEP.zip",
                        help="trace chunks to open")
    parser.add_argument("--chromium", help="Chromium binary (default: found automatically, "
                        "as for a run)")
    parser.set_defaults(handler=cmd_show_trace)


def cmd_show_trace(args: argparse.Namespace) -> int:
    return show_trace(args.traces, args.chromium)
