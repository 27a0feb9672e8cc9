"""``linewise view PATH [--serve] [--port N]``: the trace viewer of an episode, run,
bench or improve folder; ``linewise view A B … --out DIR [--label NAME]…``: one index
over several benches (``--serve``: served live, ``compare/serve.py``)."""

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
                      "pages and screenshots); several benches or an improve folder: "
                      "their index, each bench below it (--out optional: it also writes "
                      "the index there)")
    view.add_argument("--host", default="127.0.0.1",
                      help="loopback address to serve on (127.0.0.1, ::1 or localhost)")
    view.add_argument("--port", type=int, default=8790,
                      help="port to serve on (0: any free; default 8790)")
    add_log_level_flag(view, "WARNING")
    view.set_defaults(handler=cmd_view)


def _write(args: argparse.Namespace) -> Path | None:
    """The viewer the arguments ask for; returns its index page (None: several benches
    served with no --out, whose index is made by the server alone)."""
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
    if args.out is None and not args.serve:
        raise ConfigError(f"one index over {len(paths)} benches: give --out DIR, the folder "
                          "it goes to (DIR/view/index.html; each bench's own viewer is "
                          "written into it as `linewise view BENCH` writes it), or --serve "
                          "to serve it")
    benches = read_benches(paths, args.labels)
    if args.out is None:
        for bench in benches:
            write_viewer(bench.path)
        return None
    return view_benches(benches, args.out, title=_title(args))


def _title(args: argparse.Namespace) -> str:
    from linewise.apps.compare.benches import labels_for

    return " · ".join(labels_for(args.paths, args.labels))


def cmd_view(args: argparse.Namespace) -> int:
    from linewise.apps.compare.benches import is_bench, is_improve, read_benches
    from linewise.apps.compare.serve import LiveStudy
    from linewise.apps.viewer.serve import require_loopback, serve_site, serve_viewer

    if args.serve:
        require_loopback(args.host)
    index = _write(args)
    if index is not None:
        print(f"viewer: {index.resolve()}")
    if not args.serve:
        return 0
    first = args.paths[0]
    if len(args.paths) > 1:
        site = LiveStudy.of_benches(read_benches(args.paths, args.labels), _title(args))
        server = serve_site(site, args.host, args.port)
    elif first.is_dir() and not is_bench(first) and is_improve(first):
        server = serve_site(LiveStudy.of_improve(first), args.host, args.port)
    else:
        server = serve_viewer(first, args.host, args.port)
    print(f"serving {server.url} (Ctrl+C stops; the URL's token is the only way in, "
          "keep it to yourself)", flush=True)
    try:
        while server.thread.is_alive():
            time.sleep(0.5)
    finally:
        server.close()
    return 0
