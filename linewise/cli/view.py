"""``linewise view PATH [--serve] [--port N]``: the trace viewer of an episode, run,
bench or improve folder; ``linewise view A B … --out DIR [--label NAME]…``: one index
over several benches."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from linewise.apps.viewer.paths import VIEW_DIR
from linewise.cli.commands import summary
from linewise.cli.flags import add_log_level_flag
from linewise.errors import ConfigError

# What the command runs (the viewer's writer and server) is imported by ``cmd_view``, so
# that ``linewise view --help`` appears at once.


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    view = sub.add_parser(
        "view", help=summary("view"),
        description=f"Writes the viewer into PATH/{VIEW_DIR}/ (index.html, a page per "
        "episode, their data and assets), beside the traces it shows; --serve writes it "
        "too, then serves it. Several bench folders: one index over them in --out DIR.")
    view.add_argument("paths", type=Path, nargs="+", metavar="PATH",
                      help="an episode, run, bench or improve folder (the viewer is written "
                      f"into PATH/{VIEW_DIR}/); several bench folders: one index over them in "
                      "--out DIR/view/, each bench's own viewer in it")
    view.add_argument("--out", type=Path, metavar="DIR",
                      help="where the index over several benches goes (DIR/view/index.html)")
    view.add_argument("--label", dest="labels", action="append", default=[], metavar="NAME",
                      help="a bench's name in that index, one per PATH in order (default: "
                      "the folder names)")
    view.add_argument("--serve", action="store_true",
                      help="serve the viewer on localhost and follow episodes still running "
                      "(only under the printed URL's random token, and only the viewer's "
                      "pages and screenshots; one episode, run or bench folder)")
    view.add_argument("--host", default="127.0.0.1",
                      help="loopback address to serve on (127.0.0.1, ::1 or localhost)")
    view.add_argument("--port", type=int, default=8790,
                      help="port to serve on (0: any free; default 8790)")
    add_log_level_flag(view, "WARNING")
    view.set_defaults(handler=cmd_view)


def _write(args: argparse.Namespace) -> Path:
    """The viewer the arguments ask for; returns its index page."""
    from linewise.apps.compare.benches import is_bench, is_improve, read_benches
    from linewise.apps.compare.index import view_benches, view_improve
    from linewise.apps.viewer.build import write_viewer

    paths: list[Path] = args.paths
    if len(paths) == 1:
        if args.out is not None or args.labels:
            raise ConfigError("--out and --label are for one index over several benches; "
                              f"`linewise view {paths[0]}` writes into {paths[0]}/view/")
        path = paths[0]
        if path.is_dir() and not is_bench(path) and is_improve(path):
            return view_improve(path)
        return write_viewer(path)
    if args.out is None:
        raise ConfigError(f"one index over {len(paths)} benches: give --out DIR, the folder "
                          "it goes to (DIR/view/index.html; each bench's own viewer is "
                          "written into it as `linewise view BENCH` writes it)")
    benches = read_benches(paths, args.labels)
    return view_benches(benches, args.out, title=" · ".join(b.label for b in benches))


def cmd_view(args: argparse.Namespace) -> int:
    from linewise.apps.compare.benches import is_bench, is_improve
    from linewise.apps.viewer.serve import require_loopback, serve_viewer

    if args.serve:
        require_loopback(args.host)
        if len(args.paths) > 1 or (is_improve(args.paths[0]) and not is_bench(args.paths[0])):
            raise ConfigError("--serve follows one episode, run or bench folder: serve each "
                              "bench on its own (`linewise view BENCH --serve`)")
    index = _write(args)
    print(f"viewer: {index.resolve()}")
    if not args.serve:
        return 0
    server = serve_viewer(args.paths[0], args.host, args.port)
    print(f"serving {server.url} (Ctrl+C stops; the URL's token is the only way in, "
          "keep it to yourself)", flush=True)
    try:
        while server.thread.is_alive():
            time.sleep(0.5)
    finally:
        server.close()
    return 0
