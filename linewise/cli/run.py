"""``linewise run``: a task file, or one ad-hoc task with --url/--goal."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

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
from linewise.cli.interrupt import EXIT_INTERRUPTED, run_interruptible
from linewise.cli.step_prompt import TerminalOperator, require_terminal
from linewise.errors import ConfigError
from linewise.records import EpisodeSummary
from linewise.runtime.debug.stepper import StepThroughHooks
from linewise.runtime.run import default_out_dir, run_tasks
from linewise.runtime.tasks.loader import adhoc_task, load_task_file, select_tasks
from linewise.runtime.tasks.schema import AnyTask
from linewise.settings import LinewiseSettings

ADHOC_MAX_STEPS = 15


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", help="run a task file, or one ad-hoc task with --url/--goal")
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
                     "(needs a terminal; README: Debugging an agent)")
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


def print_summary_table(summaries: list[EpisodeSummary], out_dir: Path) -> None:
    rows = [("task", "success", "reward", "steps", "tokens", "time", "note")]
    for s in summaries:
        success = "-" if s.success is None else ("yes" if s.success else "no")
        note = s.error or s.budget_stop or s.termination
        rows.append((s.task_id, success, f"{s.reward:.2f}", str(s.n_steps),
                     str(s.tokens.total), f"{s.time.wall_s:.1f}s", note[:60]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    solved = sum(1 for s in summaries if s.success)
    infra = [s for s in summaries if s.outcome == "infrastructure"]
    print(f"\n{solved}/{len(summaries)} succeeded. Traces in {out_dir}/")
    config = [s for s in infra if s.infra_kind == "config"]
    infra = [s for s in infra if s.infra_kind != "config"]
    if infra:
        kinds = ", ".join(sorted({s.infra_kind or "unknown" for s in infra}))
        print(f"{len(infra)} ended on an infrastructure fault ({kinds}), not the agent's doing.")
    if config:
        print(f"{len(config)} ended on a configuration error, not the agent's doing: "
              f"{config[0].error}")


def step_through(args: argparse.Namespace, settings: LinewiseSettings) -> StepThroughHooks | None:
    """The step-through debugger for this run: with ``--step`` (which needs a terminal),
    and in a headed run from a terminal, where the first Ctrl+C pauses into it."""
    if args.step:
        require_terminal()
    elif settings.browser.headless or not sys.stdin.isatty():
        return None
    return StepThroughHooks(TerminalOperator(), paused=args.step, stop=asyncio.Event())


def cmd_run(args: argparse.Namespace) -> int:
    tasks = tasks_from_args(args)
    settings = settings_from_args(args)
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
        print_summary_table(outcome.result, out_dir)
        if len(outcome.result) < len(tasks) and not outcome.interrupted:
            print(f"{len(tasks) - len(outcome.result)} tasks not started: the run budget is "
                  "spent (--max-run-cost / --max-run-tokens).")
    if outcome.interrupted or outcome.result is None:
        print(f"Interrupted; traces in {out_dir}/")
        return EXIT_INTERRUPTED
    return exit_code_for(s.outcome for s in outcome.result)
