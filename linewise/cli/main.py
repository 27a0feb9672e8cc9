"""The ``linewise`` command: builds the parser from the subcommand modules and dispatches.

    linewise run TASKS.yaml [--task ID]... [--out DIR] [--headed] [--base-url URL --model NAME]
    linewise run --url URL --goal TEXT
    linewise replay PATH [--no-model] [--update]
    linewise bench TASKS.yaml [--filter NAME]... [--seeds K] [--concurrency N] [--resume]
    linewise report BENCH_DIR
    linewise view PATH [--serve]
    linewise show-trace EPISODE/playwright-trace/step-NNN.zip
    linewise filter-eval CASES [--filter NAME]...
    linewise filters [--all]
    linewise snapshot URL
    linewise prune RUN_DIR... --out DATASET_DIR
    linewise mine GRAPH.json
    linewise memory build RUN_DIR... --out MEMORY.jsonl
    linewise skills build SOURCE... --out DIR
    linewise retriever data --pages DIR... [--traces RUN...] --out DATASET
    linewise improve TASKS.yaml --train-seeds A-B --test-seeds C-D --rounds N --out DIR
    linewise setup [--xvfb]
    linewise model path|fetch

Each subcommand lives in its own module (cli/run.py, cli/bench.py, …) with an
``add_parser(s)`` that sets its handler; the flag groups they share are in cli/flags.py.
Exit codes: cli/exit_codes.py.
"""

from __future__ import annotations

import argparse
import sys

from linewise.cli import (
    bench,
    filter_eval,
    filters,
    improve,
    memory,
    prune,
    replay,
    retriever,
    run,
    setup,
    show_trace,
    skills,
    snapshot,
    view,
)
from linewise.cli.exit_codes import EXIT_INTERRUPTED, EXIT_OUTPUT, EXIT_SETUP, EXIT_USAGE
from linewise.errors import (
    ConfigError,
    LinewiseError,
    ProgramError,
    TaskFileError,
    TraceWriteError,
)
from linewise.runtime.log import configure_logging


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="linewise",
        description="Run LLM web agents on real Chromium, with full traces.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run.add_parser(sub)
    replay.add_parser(sub)
    filter_eval.add_parser(sub)
    filters.add_parser(sub)
    snapshot.add_parser(sub)
    setup.add_parsers(sub)
    bench.add_parsers(sub)
    prune.add_parsers(sub)
    memory.add_parser(sub)
    skills.add_parser(sub)
    retriever.add_parser(sub)
    improve.add_parser(sub)
    view.add_parser(sub)
    show_trace.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(json_lines=True if getattr(args, "log_json", False) else None,
                      level=getattr(args, "log_level", "INFO"))
    try:
        return int(args.handler(args))
    except (ConfigError, TaskFileError, ProgramError) as exc:
        print(f"linewise: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TraceWriteError as exc:
        print(f"linewise: error: {exc}", file=sys.stderr)
        return EXIT_OUTPUT
    except LinewiseError as exc:
        print(f"linewise: error: {exc}", file=sys.stderr)
        return EXIT_SETUP
    except KeyboardInterrupt:
        print("linewise: interrupted; traces written so far are kept", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
