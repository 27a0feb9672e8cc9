"""``linewise retriever``: the learned line retriever's data.

    linewise retriever data --pages DIR... [--traces RUN...] --out DATASET
        [--per-family N] [--written N] [--base-url URL --model NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import sys
from pathlib import Path

from linewise.apps.retriever.dataset import DatasetManifest, DatasetOptions, build_dataset
from linewise.cli.commands import summary
from linewise.cli.flags import add_log_level_flag, settings_from_args
from linewise.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    retriever = sub.add_parser("retriever", help=summary("retriever"))
    actions = retriever.add_subparsers(dest="retriever_command", required=True,
                                       help="data: build a training set")
    data = actions.add_parser(
        "data", help="pages and solved traces -> training examples",
        description="Read documentation folders with Chromium and derive examples from "
        "what each page states (a named element; a term described by its definition), "
        "from solved episodes (the unit each step's action needed), and, with --written, "
        "from queries a model writes with the element's own words banned. Families "
        "reserved for independent evaluation are refused; so are the families linewise's "
        "own held-out figures use, unless --allow-evaluation-families.")
    data.add_argument("--pages", nargs="+", type=Path, default=[], metavar="DIR",
                      help="folders of HTML pages, e.g. /usr/share/doc/python-flask-doc")
    data.add_argument("--traces", nargs="+", type=Path, default=[], metavar="RUN",
                      help="run, bench or episode folders; their solved episodes are used")
    data.add_argument("--out", type=Path, required=True, metavar="DIR",
                      help="the dataset folder (a rerun reuses its pages and written "
                      "queries)")
    data.add_argument("--per-family", type=int, default=30, metavar="N",
                      help="pages read from each folder (default 30)")
    data.add_argument("--per-page", type=int, default=40, metavar="N",
                      help="named and described examples kept per page, each (default 40)")
    data.add_argument("--written", type=int, default=0, metavar="N",
                      help="queries a model writes per page (default 0: none)")
    data.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    data.add_argument("--allow-evaluation-families", action="store_true",
                      help="allow the families linewise's held-out figures are measured on")
    data.add_argument("--base-url", help="endpoint of the model that writes queries "
                      "(default: the embedded model)")
    data.add_argument("--model", help="that model's name")
    data.add_argument("--api-key", help="API key (default: OPENAI_API_KEY)")
    add_log_level_flag(data, "WARNING")
    data.set_defaults(handler=cmd_data)


def cmd_data(args: argparse.Namespace) -> int:
    for name in ("per_family", "per_page"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
    if args.written < 0:
        raise ConfigError("--written must be 0 or more")
    options = DatasetOptions(
        folders=args.pages, runs=args.traces, per_family=args.per_family,
        per_page=args.per_page, written_per_page=args.written, seed=args.seed,
        allow_evaluation=args.allow_evaluation_families)
    command = shlex.join(["linewise", *sys.argv[1:]])
    manifest = asyncio.run(_build(args, options, command))
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(manifest.examples.items())) or "none"
    print(f"{args.out}: {manifest.pages} pages of {len(manifest.families)} families; "
          f"examples: {kinds}")
    if not manifest.examples:
        print("no example could be made from these sources", file=sys.stderr)
        return 1
    return 0


async def _build(args: argparse.Namespace, options: DatasetOptions, command: str,
                 ) -> DatasetManifest:
    async with contextlib.AsyncExitStack() as stack:
        model = None
        if options.written_per_page:
            from linewise.runtime.run import open_endpoints

            settings = settings_from_args(args)
            model, _ = await stack.enter_async_context(
                open_endpoints(settings, action=True, retriever=False))
        return await build_dataset(args.out, options, model=model, command=command,
                                   progress=lambda text: print(text, flush=True))
