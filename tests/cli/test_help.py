"""Every ``--help`` tells the truth: each argument is explained, shows a sensible
placeholder, and states the default a run really uses (read from the settings)."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from linewise.apps.improve.loop import SET_BY_THE_LOOP
from linewise.apps.viewer.paths import VIEW_DIR
from linewise.cli import exit_codes
from linewise.cli.commands import COMMANDS
from linewise.cli.exit_codes import EXIT_OUTPUT_CLOSED
from linewise.cli.flags import SETTINGS_FLAGS, default_of, setting_default
from linewise.cli.main import build_parser
from linewise.cli.snapshot import SCHEMES as SNAPSHOT_SCHEMES
from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.trace import EpisodeTraceWriter
from linewise.testing import ScriptedChatServer
from tests.support.cli import linewise
from tests.support.paths import DATA, REPO


def subcommands() -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in build_parser()._actions
                if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def arguments() -> list[tuple[str, argparse.Action]]:
    """Every argument a help shows (a flag refused by name is not shown)."""
    return [(name, action) for name, parser in subcommands().items()
            for action in parser._actions if not isinstance(action, argparse._HelpAction)
            and action.help != argparse.SUPPRESS]


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


# What a person meets before any command runs: the list of commands, the version, a
# command given without its subcommand, output piped into `head`. Each runs the real
# command in its own process, as typed.

HEAVY = ("playwright", "browsergym", "numpy", "openai", "tiktoken", "gymnasium", "xllamacpp",
         "onnxruntime", "pydantic", "structlog", "rich")
"""Libraries that a run needs and ``linewise --help`` does not: each took part of the
seconds the help once took to appear."""


def imported_by(*code: str) -> set[str]:
    """The modules a fresh interpreter imports to run ``code`` (``-X importtime``)."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", "\n".join(code)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_the_list_of_commands_imports_no_command_and_no_library_a_run_needs() -> None:
    # what the `linewise` script does: import main, call it
    modules = imported_by("import sys", "from linewise.cli.main import main",
                          "sys.exit(main(['--help']))")
    assert {"linewise", "linewise.cli.main"} <= modules  # the measurement works
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy
    assert sorted(m for m in modules if m.startswith("linewise.")) == [
        "linewise.cli", "linewise.cli.commands", "linewise.cli.main"]


RUN_ONLY = (*(m for m in HEAVY if m != "pydantic"), "jax", "httpx", "ray", "PIL", "bs4",
            "yaml")
"""What a command runs and its ``--help`` does not need: a command's help states the
settings' defaults (pydantic), and nothing else it shows needs a browser, a model client,
an array library or a task file parser. Importing them took over a second before any
command's help appeared."""


def help_commands() -> list[list[str]]:
    """Every command and subcommand, as typed before ``--help``."""
    words = []
    for name, parser in subcommands().items():
        words.append([name])
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                words += [[name, child] for child in action.choices]
    return words


def modules_after_help(command: list[str]) -> tuple[str, set[str]]:
    """``linewise COMMAND --help`` in a fresh interpreter, as the ``linewise`` script runs
    it: the help it printed and every module imported by then. (``-X importtime`` does
    not see the command's module, which ``main`` imports with ``importlib``.)"""
    code = "\n".join([
        "import contextlib, io, json, sys",
        "from linewise.cli.main import main",
        "shown = io.StringIO()",
        "with contextlib.redirect_stdout(shown), contextlib.suppress(SystemExit):",
        f"    main({[*command, '--help']!r})",
        "print(json.dumps([shown.getvalue(), sorted(sys.modules)]))",
    ])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    shown, modules = json.loads(result.stdout)
    return shown, set(modules)


@pytest.mark.slow
@pytest.mark.parametrize("command", help_commands(), ids=" ".join)
def test_a_command_s_help_imports_no_library_its_run_needs(command: list[str]) -> None:
    shown, modules = modules_after_help(command)
    assert shown.startswith(f"usage: linewise {' '.join(command)} ")  # it was the help
    assert f"linewise.cli.{COMMANDS[command[0]].module}" in modules
    heavy = sorted({m.split(".")[0] for m in modules if m.split(".")[0] in RUN_ONLY})
    assert heavy == [], f"linewise {' '.join(command)} --help imports {heavy}"


def test_the_list_of_commands_is_every_command_with_its_own_summary() -> None:
    result = linewise("--help", env={"COLUMNS": "500"}, timeout=60)  # no wrapping
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    for name, parser in subcommands().items():
        [choice] = [a for a in _commands_action()._choices_actions if a.dest == name]
        assert choice.help == COMMANDS[name].summary, name  # the module took it from the table
        assert f"{name} {' '.join(choice.help.split())}" in text, name
        assert parser.prog == f"linewise {name}"
    assert list(subcommands()) == list(COMMANDS)


def _commands_action() -> argparse._SubParsersAction[argparse.ArgumentParser]:
    [action] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return action


def test_version_prints_the_installed_version() -> None:
    result = linewise("--version", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"linewise {metadata.version('linewise')}\n"


@pytest.mark.parametrize(("command", "choices"), [
    (["memory"], "{build,show}"), (["skills"], "{build,show}"), (["model"], "{path,fetch}"),
    ([], "COMMAND"),
])
def test_a_missing_subcommand_is_named_by_its_choices(command: list[str], choices: str) -> None:
    result = linewise(*command, timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].endswith(
        f"error: the following arguments are required: {choices}"), result.stderr
    assert "_command" not in result.stderr and "action" not in result.stderr


def with_stdout_closed(*args: str, unbuffered: bool) -> subprocess.CompletedProcess[str]:
    """``linewise ARGS | head`` where head has already gone: stdout is a pipe with no
    reader from the start, so the first write fails, however little is written."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "linewise.cli.main", *args], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120, env=env)
    finally:
        os.close(write)


@pytest.mark.slow
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("command", [["filters"], ["filters", "--all"], ["--help"],
                                     ["run", "--help"], ["--version"], ["mine"]])
def test_output_into_a_closed_pipe_ends_quietly(command: list[str], unbuffered: bool,
                                                tmp_path: Path) -> None:
    if command == ["mine"]:
        graph = tmp_path / "graph.json"
        graph.write_text(json.dumps({
            "nodes": [{"id": "I0", "kind": "info"}, {"id": "A1", "kind": "action"}],
            "edges": [["I0", "A1"]], "source": "I0", "sink": "A1"}))
        command = ["mine", str(graph)]
    result = with_stdout_closed(*command, unbuffered=unbuffered)
    assert result.stderr == ""
    assert result.returncode == EXIT_OUTPUT_CLOSED == 128 + signal.SIGPIPE


MINIWOB_TASKS = "tasks:\n  - {miniwob: click-test, seed: 0, max_steps: 2}\n"


def flags_in(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_text))


@pytest.mark.slow
def test_improve_offers_no_flag_for_what_the_loop_sets_itself(tmp_path: Path) -> None:
    shown = flags_in(linewise("improve", "--help", timeout=60).stdout)
    assert {"--memory-k", "--memory-budget", "--skill-start", "--skills-arm",
            "--no-replay-cache"} <= shown
    assert not {"--memory", "--skills", "--replay-cache"} & shown
    assert {f"--{name.replace('_', '-')}" for name in SET_BY_THE_LOOP} == {
        "--memory", "--skills", "--replay-cache"}
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(MINIWOB_TASKS)
    out = tmp_path / "improve"
    loop = ["improve", str(tasks), "--train-seeds", "0-0", "--test-seeds", "1-1", "--out",
            str(out), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    for flag, what in [("--memory", "memory"), ("--skills", "skills"),
                       ("--replay-cache", "replay cache")]:
        given = linewise(*loop, flag, str(tmp_path / "x"), timeout=60)
        assert given.returncode == 2
        assert given.stderr.splitlines()[-1] == (
            f"linewise improve: error: {flag}: not taken here: linewise improve makes its "
            f"own {what}"), given.stderr
    # the same settings from the environment are refused by name, before anything runs
    from_env = linewise(*loop, env={"LINEWISE_AGENT__SKILLS": str(tmp_path)}, timeout=60)
    assert from_env.returncode == 2, from_env.stderr
    assert "makes its own skills" in from_env.stderr
    assert "LINEWISE_AGENT__SKILLS" in from_env.stderr and not out.exists()


def test_a_flag_means_one_thing_in_every_command() -> None:
    """A flag of several commands sets the same thing in each (its dest): prune's
    --max-obs-tokens once set the extractor's page budget where run's set the truncate
    filter's."""
    meaning: dict[str, set[str]] = {}
    for _, action in arguments():
        # bench and filter-eval take --filter repeatedly, to compare filters: the same
        # meaning, gathered in a list (dest "filters")
        dest = "filter" if isinstance(action, argparse._AppendAction) and \
            action.dest == "filters" else action.dest
        for flag in action.option_strings:
            meaning.setdefault(flag, set()).add(dest)
    assert {flag: dests for flag, dests in meaning.items() if len(dests) > 1} == {}
    assert meaning["--max-obs-tokens"] == {"max_obs_tokens"}
    assert meaning["--extractor-obs-tokens"] == {"extractor_obs_tokens"}


@pytest.mark.slow
def test_prune_describes_its_models_and_offers_no_agent_flag(tmp_path: Path) -> None:
    text = " ".join(linewise("prune", "--help", timeout=60).stdout.split())
    assert "--base-url URL OpenAI-compatible endpoint of the base model: the agent's own " \
        "model, which picks among the rewritten thoughts by their perplexity, and the " \
        "extractor unless --extractor-base-url" in text
    assert "action model" not in text
    shown = flags_in(text)
    assert not {"--retriever-base-url", "--retriever-model", "--context-tokens",
                "--max-obs-tokens"} & shown
    assert {"--extractor-obs-tokens", "--extractor-base-url", "--gguf"} <= shown
    run = tmp_path / "run"
    write_one_step_episode(run)
    renamed = linewise("prune", str(run), "--out", str(tmp_path / "d"), "--max-obs-tokens",
                       "500", timeout=60)
    assert renamed.returncode == 2
    assert renamed.stderr.splitlines()[-1] == (
        "linewise prune: error: --max-obs-tokens: prune calls it --extractor-obs-tokens "
        "(--max-obs-tokens of run and bench is the truncate filter's budget)")
    # the retriever is never opened: a retriever endpoint that is down changes nothing
    with ScriptedChatServer(lambda messages: "unused") as llm:
        pruned = linewise("prune", str(run), "--out", str(tmp_path / "d"), "--base-url",
                          llm.base_url, "--model", "base", timeout=120,
                          env={"LINEWISE_RETRIEVER__BASE_URL": "http://127.0.0.1:9/v1",
                               "LINEWISE_RETRIEVER__MODEL": "down"})
    assert pruned.returncode == 0, pruned.stderr[-2000:]
    assert json.loads((tmp_path / "d" / "stats.json").read_text())["unpruned"] == 1


def write_one_step_episode(run: Path) -> None:
    writer = EpisodeTraceWriter(run / "one")
    summary = EpisodeSummary(episode_id="ep-one", task_id="one", goal="Press OK.",
                             start_url="http://ok.test/")
    writer.start(summary)
    writer.write_step(StepRecord(episode_id="ep-one", task_id="one", index=0,
                                 url="http://ok.test/", axtree="[2] button 'OK'",
                                 observation="[2] button 'OK'", think="Press OK.",
                                 action="click('2')", done=True, reward=1.0))
    summary.status, summary.success, summary.n_steps = "finished", True, 1
    writer.write_summary(summary)


@pytest.mark.slow
def test_snapshot_reads_what_its_help_says(tmp_path: Path) -> None:
    text = " ".join(linewise("snapshot", "--help", timeout=60).stdout.split())
    assert "URL the page to read: an http, https or file URL, or the path of a local " \
        "file" in text
    assert SNAPSHOT_SCHEMES == ("http", "https", "file")
    page = tmp_path / "form.html"
    page.write_text((DATA / "pages" / "form.html").read_text())
    for given in (str(page), page.as_uri()):  # a path, and its file: URL
        out = tmp_path / "case.json"
        result = linewise("snapshot", given, "--out", str(out), timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        case = json.loads(out.read_text())
        assert case["source"] == page.as_uri()
        assert any("button 'Submit'" in line for line in case["lines"]), case["lines"]
    for url, scheme in (("data:text/html,<button>x</button>", "data"), ("ftp://x.test/", "ftp")):
        refused = linewise("snapshot", url, "--out", str(tmp_path / "no.json"), timeout=60)
        assert refused.returncode == 2
        assert f"{scheme}: URLs are not read (give an http, https or file URL, or the " \
            "path of a local file)" in refused.stderr
    missing = linewise("snapshot", str(tmp_path / "nope.html"), timeout=60)
    assert missing.returncode == 2 and "no such file, and not a URL" in missing.stderr
    assert not (tmp_path / "no.json").exists()


@pytest.mark.slow
def test_view_says_it_writes_into_the_folder_and_does(tmp_path: Path) -> None:
    text = " ".join(linewise("view", "--help", timeout=60).stdout.split())
    assert f"Writes the viewer into PATH/{VIEW_DIR}/" in text
    assert f"the viewer is written into PATH/{VIEW_DIR}/" in text
    run = tmp_path / "run"
    write_one_step_episode(run)
    result = linewise("view", str(run), timeout=60)
    assert result.returncode == 0, result.stderr
    index = run / VIEW_DIR / "index.html"
    assert index.is_file() and result.stdout == f"viewer: {index.resolve()}\n"


def test_the_documentation_lists_every_exit_code() -> None:
    page = REPO / "docs" / "failures.md"
    table = page.read_text(encoding="utf-8").split("**Exit codes**", 1)[1]
    rows = re.findall(r"^\| (\d+) \|", table.split("\n\n", 2)[1], re.MULTILINE)
    codes = {value for name, value in vars(exit_codes).items() if name.startswith("EXIT_")}
    assert sorted(int(row) for row in rows) == sorted(codes)
