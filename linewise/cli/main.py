"""The ``linewise`` command: builds the parser from the subcommand modules and dispatches.

    linewise run TASKS.yaml [--task ID]... [--out DIR] [--headed] [--base-url URL --model NAME]
    linewise run --url URL --goal TEXT
    linewise replay PATH [--no-model] [--update]
    linewise bench TASKS.yaml [--filter NAME]... [--seeds K] [--concurrency N] [--resume]
    linewise report BENCH_DIR|IMPROVE_DIR
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
    linewise --version

Each subcommand lives in its own module (cli/run.py, cli/bench.py, …) with an
``add_parser(s)`` that sets its handler; the flag groups they share are in cli/flags.py,
and the table of commands (name, summary, module) in cli/commands.py. Only the module
of the command being run is imported (see ``parser_for``). Exit codes: cli/exit_codes.py.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from linewise.cli.commands import COMMANDS

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

DESCRIPTION = "Run LLM web agents on real Chromium, with full traces."


class _Parser(argparse.ArgumentParser):
    """argparse's parser, except that a help or usage written into a closed pipe fails
    as any other output does (``main`` ends quietly), where argparse would ignore the
    failed write and end with 0 or 1 depending on how much was buffered. Subcommands
    get the same class."""

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        if message:
            (file or sys.stderr).write(message)


class _VersionAction(argparse.Action):
    """``--version``: the installed package's version, read only when asked for."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        import linewise

        print(f"linewise {linewise.__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Every command in full (what the tests and the docs read)."""
    return _parser(set(COMMANDS))


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser ``argv`` needs: the command it names in full, the others by name and
    summary only, so that neither ``linewise --help`` nor an unknown command imports a
    command module. The first word not starting with ``-`` is the command: ``linewise``
    itself takes no option with a value."""
    command = next((word for word in argv if not word.startswith("-")), None)
    return _parser({command} if command in COMMANDS else set())


def _parser(full: set[str]) -> argparse.ArgumentParser:
    parser = _Parser(prog="linewise", description=DESCRIPTION)
    parser.add_argument("--version", action=_VersionAction,
                        help="print the version of linewise and exit")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    modules = {COMMANDS[name].module for name in full}
    built: set[str] = set()
    for name, command in COMMANDS.items():
        if command.module not in modules:
            sub.add_parser(name, help=command.summary)
        elif command.module not in built:  # its module adds all of its commands
            module = importlib.import_module(f"linewise.cli.{command.module}")
            add = getattr(module, "add_parsers", None) or module.add_parser
            add(sub)
            built.add(command.module)
    _name_choices(parser)
    return parser


def _name_choices(parser: argparse.ArgumentParser) -> None:
    """A positional with choices (a command, ``model path|fetch``) is named by its
    choices where argparse would name it by its ``dest``: a missing one reads "required:
    {build,show}", not the internal "memory_command"."""
    for action in parser._actions:
        if action.option_strings or action.choices is None:
            continue
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _name_choices(child)
        if action.metavar is None:
            action.metavar = "{" + ",".join(action.choices) + "}"


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            return _main(words)
        finally:
            sys.stdout.flush()  # so that a closed pipe shows here, not at exit
    except BrokenPipeError:
        return _output_closed()


def _main(argv: list[str]) -> int:
    args = parser_for(argv).parse_args(argv)
    # Imported once the command is known (see parser_for).
    from linewise.cli.exit_codes import EXIT_INTERRUPTED, EXIT_OUTPUT, EXIT_SETUP, EXIT_USAGE
    from linewise.errors import (
        ConfigError,
        LinewiseError,
        ProgramError,
        TaskFileError,
        TraceWriteError,
    )
    from linewise.runtime.log import configure_logging

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


def _output_closed() -> int:
    """The reader of the output went away (``linewise filters | head``): stop quietly, as
    a command killed by SIGPIPE does, with its exit code.

    SIGPIPE keeps Python's setting (ignored, so a write raises BrokenPipeError): its
    default action would also kill the process for a write to a closed socket or to a
    dead Playwright driver's pipe, mid-run, with no trace finished. stdout is pointed at
    /dev/null so that Python's own flush at exit does not fail a second time."""
    from linewise.cli.exit_codes import EXIT_OUTPUT_CLOSED

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a captured stream in a test)
        pass
    return EXIT_OUTPUT_CLOSED


if __name__ == "__main__":
    sys.exit(main())
