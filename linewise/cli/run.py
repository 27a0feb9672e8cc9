"""``linewise run``: a task file, or one ad-hoc task with --url/--goal."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from linewise.cli.commands import summary
from linewise.cli.display import require_display
from linewise.cli.exit_codes import exit_code_for
from linewise.cli.flags import (
    DEFAULT_FILTER,
    add_agent_flags,
    add_browser_flags,
    add_episode_flags,
    add_focus_flags,
    add_log_flags,
    add_model_flags,
    add_safety_flags,
    filter_choices,
    filter_name,
    settings_from_args,
)
from linewise.cli.interrupt import run_interruptible
from linewise.cli.results_table import print_summary_table
from linewise.errors import ConfigError
from linewise.settings import LinewiseSettings

if TYPE_CHECKING:
    from linewise.runtime.debug.stepper import StepThroughHooks
    from linewise.runtime.tasks.schema import AnyTask

# What the command runs (Playwright, the agent, the model clients) is imported by
# ``cmd_run``, so that ``linewise run --help`` appears at once.

ADHOC_MAX_STEPS = 15


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", help=summary("run"))
    run.add_argument("tasks", nargs="?", type=Path, help="a YAML task file")
    run.add_argument("--url", help="start URL of an ad-hoc task")
    run.add_argument("--goal", help="goal of an ad-hoc task")
    run.add_argument("--task", action="append", default=[], metavar="ID",
                     help="run only these task ids (repeatable)")
    run.add_argument("--max-steps", type=int, help="override every task's step limit "
                     f"(ad-hoc default {ADHOC_MAX_STEPS})")
    run.add_argument("--out", type=Path, help="output folder (default runs/<timestamp>)")
    run.add_argument("--step", action="store_true",
                     help="step through: before each action show it and ask what to do "
                     "(needs a terminal; docs/debugging.md)")
    add_browser_flags(run)
    add_model_flags(run)
    run.add_argument("--filter", type=filter_name, metavar="NAME",
                     help=f"observation filter (default {DEFAULT_FILTER}): {filter_choices()}")
    add_focus_flags(run)
    add_agent_flags(run)
    add_episode_flags(run)
    add_safety_flags(run)
    add_log_flags(run, level="INFO")
    run.set_defaults(handler=cmd_run)


def tasks_from_args(args: argparse.Namespace) -> list[AnyTask]:
    from linewise.runtime.tasks.loader import adhoc_task, load_task_file, select_tasks

    if args.tasks and (args.url or args.goal):
        raise ConfigError("give either a task file or --url/--goal, not both")
    if args.url or args.goal:
        if not (args.url and args.goal):
            raise ConfigError("an ad-hoc task needs both --url and --goal")
        tasks: list[AnyTask] = [
            adhoc_task(args.url, args.goal, args.max_steps or ADHOC_MAX_STEPS)
        ]
    elif args.tasks:
        tasks = load_task_file(args.tasks)
    else:
        raise ConfigError("nothing to run: give a task file or --url and --goal")
    return select_tasks(tasks, args.task, args.max_steps)


def step_through(args: argparse.Namespace, settings: LinewiseSettings) -> StepThroughHooks | None:
    """The step-through debugger for this run: with ``--step`` (which needs a terminal),
    and in a headed run from a terminal, where the first Ctrl+C pauses into it."""
    from linewise.cli.step_prompt import TerminalOperator, require_terminal
    from linewise.runtime.debug.stepper import StepThroughHooks

    if args.step:
        require_terminal()
    elif settings.browser.headless or not sys.stdin.isatty():
        return None
    return StepThroughHooks(TerminalOperator(headless=settings.browser.headless),
                            paused=args.step, stop=asyncio.Event())


def cmd_run(args: argparse.Namespace) -> int:
    from linewise.runtime.run import default_out_dir, run_tasks

    tasks = tasks_from_args(args)
    settings = settings_from_args(args)
    require_display(args, settings)
    stepper = step_through(args, settings)
    hooks = [stepper] if stepper is not None else []
    # Ctrl+C pauses into the prompt only where the person can see what it paused on.
    pause = stepper.paused if stepper is not None and not settings.browser.headless else None
    out_dir = args.out or default_out_dir()
    outcome = asyncio.run(run_interruptible(
        lambda stop: run_tasks(tasks, settings, out_dir, hooks=hooks, argv=sys.argv, stop=stop,
                               pause=pause),
        stop=stepper.stop if stepper is not None else None, pause=pause,
    ))
    if outcome.result is not None:
        print_summary_table(outcome.result, out_dir,
                            [task.id for task in tasks[len(outcome.result):]])
        if len(outcome.result) < len(tasks) and not outcome.interrupted:
            print(f"{len(tasks) - len(outcome.result)} tasks not started: the run budget is "
                  "spent (--max-run-cost / --max-run-tokens).")
    if outcome.interrupted or outcome.result is None:
        print(f"{outcome.stopped_by}; traces in {out_dir}/")
        return outcome.exit_code
    return exit_code_for(s.outcome for s in outcome.result)
