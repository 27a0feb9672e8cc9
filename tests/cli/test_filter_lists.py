"""``--help``, ``linewise filters`` and docs/filters.md list the filters the registry has."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest

from linewise.agent.filters.registry import filter_names, register_filter, unregister_filter
from linewise.agent.filters.stages.presets import PRESETS, STAGES
from linewise.agent.filters.truncate import NoFilter
from linewise.cli.docs import FILTERS_PAGE, filters_markdown, generated_block
from linewise.cli.flags import settings_from_args
from linewise.cli.main import build_parser, main
from tests.support.paths import REPO


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices[name]


def _filter_help(command: str) -> str:
    [action] = [a for a in _subparser(build_parser(), command)._actions
                if "--filter" in a.option_strings]
    assert action.help is not None
    return action.help


@pytest.fixture
def extra_public() -> Iterator[str]:
    register_filter("first-lines-in-test", lambda context: NoFilter(),
                    description="registered by a test")
    try:
        yield "first-lines-in-test"
    finally:
        unregister_filter("first-lines-in-test")


@pytest.mark.parametrize("command", ["run", "bench", "filter-eval"])
def test_filter_help_lists_the_registry_s_public_names(command: str, extra_public: str) -> None:
    text = _filter_help(command)
    assert ", ".join(filter_names()) in text and extra_public in text
    assert "focus-outline" not in text and "linewise filters --all" in text


def test_the_documented_tables_are_what_the_registry_generates() -> None:
    """Run ``python -m linewise.cli.docs`` when this fails."""
    assert FILTERS_PAGE == REPO / "docs" / "filters.md"
    assert generated_block(FILTERS_PAGE.read_text(encoding="utf-8")) == filters_markdown()


def test_the_generated_tables_cover_every_public_filter_preset_and_stage() -> None:
    table = filters_markdown()
    for name in filter_names(entry_points=False):
        assert f"| `{name}`" in table
    assert "`focus-outline`" not in table
    for name in [*PRESETS, *STAGES]:
        assert f"| `{name}`" in table


def test_linewise_filters_lists_public_ones_and_all_on_request(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["filters"]) == 0
    public = capsys.readouterr().out
    for name in [*filter_names(), *PRESETS, *STAGES]:
        assert f"\n  {name}" in public
    assert "focus-outline" not in public and "linewise filters --all" in public
    assert main(["filters", "--all"]) == 0
    every = capsys.readouterr().out
    for name in filter_names(include_hidden=True):
        assert f"\n  {name}" in every


def test_focus_flags_set_the_preset_and_the_stages() -> None:
    args = build_parser().parse_args([
        "filter-eval", "cases", "--filter", "focus", "--focus-preset", "candidates-items",
        "--focus-stages", "named,lexical"])
    settings = settings_from_args(args, resolve=False).filter
    assert settings.focus_preset == "candidates-items"
    assert settings.focus_stages == ("guard", "named", "lexical")
    unset = settings_from_args(build_parser().parse_args(["run", "--filter", "focus"]),
                               resolve=False).filter
    assert unset.focus_preset == "expand-shared-units" and unset.focus_stages is None


@pytest.mark.parametrize(("flag", "value", "expected"), [
    ("--focus-preset", "fast", "unknown focus preset 'fast'; available: expand-shared-units"),
    ("--focus-stages", "lexical,nope", "unknown focus stage 'nope'; valid: guard"),
    ("--filter", "nope", "research variants: linewise filters --all"),
])
def test_a_bad_focus_flag_is_a_usage_error_listing_the_valid_values(
    flag: str, value: str, expected: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["run", flag, value])
    assert caught.value.code == 2
    assert expected in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "bench", "filter-eval"])
def test_the_unknown_filter_error_lists_what_the_help_lists(
    command: str, capsys: pytest.CaptureFixture[str],
) -> None:
    positional = {"run": [], "bench": ["t.yaml"], "filter-eval": ["c"]}[command]
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, *positional, "--filter", "nope"])
    error = capsys.readouterr().err
    listed = error.split("available: ", 1)[1].split(" (and ", 1)[0]
    assert listed == ", ".join(filter_names())
    assert f"{listed}; research variants" in _filter_help(command)


def test_the_registry_reads_the_built_ins_when_a_name_is_first_needed() -> None:
    code = "\n".join([
        "import sys",
        "from linewise.agent.filters import registry",
        "assert 'linewise.agent.filters.builtins' not in sys.modules",
        "names = registry.filter_names()",
        "assert 'linewise.agent.filters.builtins' in sys.modules",
        "assert names[:3] == ['auto', 'none', 'truncate'], names",
        "assert not any(m.startswith('linewise.agent.filters.stages.candidates')",
        "               for m in sys.modules)",
    ])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
