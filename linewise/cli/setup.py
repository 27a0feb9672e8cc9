"""``linewise setup`` and ``linewise model``: what a machine needs before a run."""

from __future__ import annotations

import argparse

from linewise.cli.commands import summary

# What the commands run (the installer, the model files) is imported by them, so that
# their ``--help`` appears at once.


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    set_up = sub.add_parser("setup", help=summary("setup"))
    set_up.add_argument("--xvfb", action="store_true",
                        help="also install Xvfb and tmux (headed runs on a machine without "
                        "a display; the terminal tests of run --step)")
    set_up.add_argument("--no-model", action="store_true", help="skip the embedded model")
    set_up.set_defaults(handler=cmd_setup)

    model = sub.add_parser("model", help=summary("model"))
    model.add_argument("action", choices=["path", "fetch"],
                       help="path: print the cached model path; fetch: assemble and verify it")
    model.set_defaults(handler=cmd_model)


def cmd_setup(args: argparse.Namespace) -> int:
    from linewise.runtime.install import setup

    for what, where in setup(with_model=not args.no_model, with_xvfb=args.xvfb).items():
        print(f"{what}: {where}")
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    from linewise.runtime.models.files import ensure_embedded_model

    print(ensure_embedded_model())
    return 0
