"""``linewise replay PATH``: run a solved task's recorded actions again, without a model."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from linewise.cli.commands import summary
from linewise.cli.display import require_display
from linewise.cli.exit_codes import EXIT_OK, EXIT_REPLAY_FAILED, exit_code_for
from linewise.cli.flags import (
    add_browser_flags,
    add_episode_flags,
    add_log_flags,
    add_model_flags,
    add_safety_flags,
    settings_from_args,
)
from linewise.cli.interrupt import run_interruptible
from linewise.cli.results_table import print_summary_table

# What the command runs (Playwright, the model clients) is imported by ``cmd_replay``,
# so that ``linewise replay --help`` appears at once.


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "replay", help=summary("replay"),
        description="Replay the actions of solved episodes on a fresh load of their "
        "pages. PATH is an episode folder, a run or bench folder (its successful "
        "episodes), a pruned dataset (linewise prune) or a program file. Each step finds "
        "its element again by its recorded locator and checks the recorded effect; a "
        "step that does not fit goes to the action model (healing), or with --no-model "
        "ends the episode 'diverged'.")
    parser.add_argument("path", type=Path, metavar="PATH",
                        help="an episode, run or bench folder, a pruned dataset or a "
                        "program file")
    parser.add_argument("--no-model", action="store_true",
                        help="never start or ask a model: a divergence ends the episode")
    parser.add_argument("--update", action="store_true",
                        help="write a healed program that succeeded back where it came from")
    parser.add_argument("--out", type=Path, help="output folder (default runs/<timestamp>)")
    add_browser_flags(parser)
    add_model_flags(parser)
    add_episode_flags(parser)
    add_safety_flags(parser)
    add_log_flags(parser, level="INFO")
    parser.set_defaults(handler=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from linewise.runtime.replay.program import load_programs
    from linewise.runtime.replays import replay
    from linewise.runtime.run import default_out_dir

    if args.no_model and args.update:
        print("linewise: --update has nothing to write without a model (--no-model)",
              file=sys.stderr)
    programs = load_programs(args.path)  # bad input fails here, before anything starts
    settings = settings_from_args(args)
    require_display(args, settings)
    out_dir = args.out or default_out_dir()
    outcome = asyncio.run(run_interruptible(
        lambda stop: replay(args.path, heal=not args.no_model, update=args.update,
                            settings=settings, out_dir=out_dir, argv=sys.argv, stop=stop)))
    if outcome.result is not None:
        print_summary_table(outcome.result, out_dir,
                            [p.task_id for p in programs[len(outcome.result):]])
    if outcome.interrupted or outcome.result is None:
        print(f"{outcome.stopped_by}; traces in {out_dir}/")
        return outcome.exit_code
    code = exit_code_for(s.outcome for s in outcome.result)
    if code == EXIT_OK and not all(s.success for s in outcome.result):
        return EXIT_REPLAY_FAILED
    return code
