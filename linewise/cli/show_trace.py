"""``linewise show-trace STEP.zip``: a ``--playwright-trace`` chunk in Playwright's trace
viewer, on linewise's Chromium (``runtime/debug/show_trace.py``).

The viewer is a browser window: without a display, Chromium cannot open it and the
driver fails with a bare "Protocol error (Browser.getVersion)", so a missing display is
refused first, with the command under Xvfb (``cli/display.py``, as for ``--headed``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from linewise.cli.commands import summary
from linewise.cli.display import no_display
from linewise.runtime.browser.display import display_problem


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
    from linewise.runtime.debug.show_trace import require_traces, show_trace

    require_traces(args.traces)  # a wrong path is the first thing to say
    problem = display_problem()
    if problem is not None:
        raise no_display(
            "show-trace opens Playwright's trace viewer in a browser window, "
            "which needs a display", problem,
            otherwise="or open the file at https://trace.playwright.dev (it is read in "
            "your browser, never uploaded)")
    return show_trace(args.traces, args.chromium)
