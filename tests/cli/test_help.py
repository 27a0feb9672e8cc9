"""Every ``--help`` tells the truth: each argument is explained, shows a sensible
placeholder, and states the default a run really uses (read from the settings)."""

from __future__ import annotations

import argparse

import pytest

from linewise.cli.flags import SETTINGS_FLAGS, default_of, setting_default
from linewise.cli.main import build_parser


def subcommands() -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in build_parser()._actions
                if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def arguments() -> list[tuple[str, argparse.Action]]:
    return [(name, action) for name, parser in subcommands().items()
            for action in parser._actions if not isinstance(action, argparse._HelpAction)]


@pytest.mark.parametrize(("command", "action"), arguments(),
                         ids=lambda value: value if isinstance(value, str) else value.dest)
def test_every_argument_is_explained_with_a_placeholder_of_its_own(
    command: str, action: argparse.Action,
) -> None:
    assert action.help, f"linewise {command} {action.dest}: no help"
    if action.option_strings and action.nargs != 0 and action.metavar is None \
            and action.choices is None:
        # argparse would show the dest, which says nothing when it is not the flag's name
        flag = action.option_strings[-1].lstrip("-").replace("-", "_")
        assert action.dest == flag, f"linewise {command} {flag} shows {action.dest.upper()}"


def test_the_defaults_in_the_help_are_the_settings_defaults() -> None:
    checked = set()
    for command, action in arguments():
        if action.dest not in SETTINGS_FLAGS or action.nargs == 0:
            continue
        default = setting_default(action.dest)
        if isinstance(default, bool) or not isinstance(default, int | float | str):
            continue  # None (found or derived at run time), lists, on/off flags
        if command == "bench" and action.dest == "episode_timeout":
            continue  # the bench has its own default, stated in its help
        assert action.help and default_of(action.dest) in action.help, (command, action.dest)
        checked.add(action.dest)
    assert {"action_timeout", "navigation_timeout", "parse_retries", "max_obs_tokens",
            "request_timeout", "ctx_size", "highlight"} <= checked


def test_snapshot_offers_only_what_reading_a_page_uses() -> None:
    flags = {flag for action in subcommands()["snapshot"]._actions
             for flag in action.option_strings}
    assert not flags & {"--highlight", "--slow-mo", "--downloads", "--action-timeout"}
    assert {"--headed", "--chromium", "--navigation-timeout", "--allow-domain"} <= flags


@pytest.mark.parametrize("command", ["run", "bench", "report", "view", "prune", "mine",
                                     "filter-eval"])
def test_log_level_takes_a_level_in_any_case_and_refuses_others(
    command: str, capsys: pytest.CaptureFixture[str],
) -> None:
    [action] = [a for a in subcommands()[command]._actions if "--log-level" in a.option_strings]
    assert action.choices is not None and "WARNING" in action.choices
    positional = {"run": [], "bench": ["t.yaml"], "report": ["d"], "view": ["p"],
                  "prune": ["r", "--out", "o"], "mine": ["g.json"], "filter-eval": ["c"]}
    args = build_parser().parse_args([command, *positional[command], "--log-level", "debug"])
    assert args.log_level == "DEBUG"
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, *positional[command], "--log-level", "loud"])
    assert "invalid choice: 'loud'" in capsys.readouterr().err
