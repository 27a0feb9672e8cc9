"""``linewise view PATH [--serve] [--port N]``: the trace viewer of an episode, run or
bench folder."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from linewise.apps.viewer.build import write_viewer
from linewise.apps.viewer.paths import VIEW_DIR
from linewise.apps.viewer.serve import require_loopback, serve_viewer
from linewise.cli.commands import summary
from linewise.cli.flags import add_log_level_flag


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    view = sub.add_parser(
        "view", help=summary("view"),
        description=f"Writes the viewer into PATH/{VIEW_DIR}/ (index.html, a page per "
        "episode, their data and assets), beside the traces it shows; --serve writes it "
        "too, then serves it.")
    view.add_argument("path", type=Path, metavar="PATH",
                      help=f"an episode, run or bench folder; the viewer is written into "
                      f"PATH/{VIEW_DIR}/")
    view.add_argument("--serve", action="store_true",
                      help="serve the viewer on localhost and follow episodes still running "
                      "(only under the printed URL's random token, and only the viewer's "
                      "pages and screenshots)")
    view.add_argument("--host", default="127.0.0.1",
                      help="loopback address to serve on (127.0.0.1, ::1 or localhost)")
    view.add_argument("--port", type=int, default=8790,
                      help="port to serve on (0: any free; default 8790)")
    add_log_level_flag(view, "WARNING")
    view.set_defaults(handler=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    if args.serve:
        require_loopback(args.host)
    index = write_viewer(args.path)
    print(f"viewer: {index.resolve()}")
    if not args.serve:
        return 0
    server = serve_viewer(args.path, args.host, args.port)
    print(f"serving {server.url} (Ctrl+C stops; the URL's token is the only way in, "
          "keep it to yourself)", flush=True)
    try:
        while server.thread.is_alive():
            time.sleep(0.5)
    finally:
        server.close()
    return 0
