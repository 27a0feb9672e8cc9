"""A headed run without a display is refused before anything starts, with the command
to run instead (``runtime/browser/display.py`` says why it would otherwise hang): by
every command with ``--headed`` (run, bench, replay, improve, snapshot), and by
``show-trace``, whose viewer is a browser window."""

from __future__ import annotations

import argparse
import shlex
import sys

from linewise.errors import ConfigError
from linewise.runtime.browser.display import display_problem
from linewise.settings import LinewiseSettings

SECRET_FLAGS = ("--api-key",)
"""Flags whose value the suggested command must not repeat on the screen."""


def command_line(argv: list[str]) -> str:
    """``argv`` as the ``linewise`` command a person would type again, secret values
    masked."""
    words = ["linewise", *argv[1:]]
    for index, word in enumerate(words):
        if word in SECRET_FLAGS and index + 1 < len(words):
            words[index + 1] = "…"
        elif word.startswith(tuple(f"{flag}=" for flag in SECRET_FLAGS)):
            words[index] = word.split("=", 1)[0] + "=…"
    return shlex.join(words).replace("'…'", "…")


def require_display(args: argparse.Namespace, settings: LinewiseSettings,
                    argv: list[str] | None = None) -> None:
    """Fail with ``ConfigError`` (exit 2) when ``settings`` ask for a headed Chromium
    and there is no display. Every command that launches Chromium calls it once its
    settings are read, before the model or anything else starts."""
    if settings.browser.headless:
        return
    problem = display_problem()
    if problem is None:
        return
    what = ("--headed" if getattr(args, "headless", None) is False
            else "a headed run (LINEWISE_BROWSER__HEADLESS=false)")
    raise no_display(f"{what} needs a display to open the browser window", problem,
                     argv, "or run it headless")


def no_display(what: str, problem: str, argv: list[str] | None = None,
               otherwise: str = "") -> ConfigError:
    """The error of a command that needs a window without a display: ``what`` it
    needs, why there is none, and the same command under Xvfb (then ``otherwise``)."""
    command = command_line(argv if argv is not None else sys.argv)
    return ConfigError(
        f"{what}, and {problem}.\n"
        f"  Run it under a virtual display:  xvfb-run -a {command}\n"
        "  (`linewise setup --xvfb` installs Xvfb and xvfb-run)"
        + (f", {otherwise}." if otherwise else ".")
    )
