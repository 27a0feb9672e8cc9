"""``linewise improve``: bench, prune, remember, bench again — round after round.

    linewise improve TASKS.yaml --train-seeds A-B --test-seeds C-D [--rounds N] --out DIR
                     [--no-baseline] [--no-prune] [--prune-repeats N] [--no-embed]
                     [model, endpoint, agent and browser flags]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from linewise.apps.bench.options import BenchOptions
from linewise.apps.improve.options import SET_BY_THE_LOOP, ImproveOptions, SeedRange
from linewise.apps.pruning.options import PruneOptions
from linewise.cli.commands import summary
from linewise.cli.display import require_display
from linewise.cli.flags import (
    AUTO_LEVEL_HELP,
    add_agent_flags,
    add_browser_flags,
    add_episode_flags,
    add_log_flags,
    add_model_flags,
    default_of,
    filter_name,
    settings_from_args,
)
from linewise.errors import ConfigError

# What the command runs (the loop's benches, the pruner, the embedder) is imported by
# ``cmd_improve``, so that ``linewise improve --help`` appears at once.


def seed_range(text: str) -> SeedRange:
    """argparse ``type`` of ``--train-seeds`` and ``--test-seeds``: a bad range is a usage
    error naming the flag, not a traceback."""
    try:
        return SeedRange.parse(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    improve = sub.add_parser(
        "improve", help=summary("improve"),
        description="The self-improvement loop without training weights: each round "
        "benches the training seeds with the memory so far, prunes that bench, rebuilds "
        "the memory from every training bench, and benches the (disjoint) test seeds with "
        "it. Reports success per round with its standard error. The same command again "
        "continues a loop that stopped: finished benches are kept, unfinished ones run "
        "only the episodes they lack.")
    improve.add_argument("tasks", type=Path, help="a YAML task file of miniwob/browsergym tasks")
    improve.add_argument("--train-seeds", type=seed_range, required=True, metavar="A-B",
                         help="the seeds the memory learns from")
    improve.add_argument("--test-seeds", type=seed_range, required=True, metavar="C-D",
                         help="the seeds success is measured on (disjoint from the training "
                         "seeds)")
    improve.add_argument("--rounds", type=int, default=1, metavar="N",
                         help="train-prune-remember-test rounds (default 1)")
    improve.add_argument("--out", type=Path, required=True, metavar="DIR",
                         help="the loop's folder: every bench, dataset and memory")
    improve.add_argument("--task", action="append", default=[], metavar="ID",
                         help="only these task ids (repeatable)")
    improve.add_argument("--max-steps", type=int, help="override every task's step limit")
    improve.add_argument("--filter", type=filter_name, metavar="NAME",
                         help="the observation filter of every bench "
                         f"({default_of('filter')})")
    improve.add_argument("--concurrency", type=int, default=1, metavar="N",
                         help="episodes at once in each bench (default 1)")
    improve.add_argument("--no-baseline", dest="baseline", action="store_false",
                         help="skip round 0 (the test seeds without a memory)")
    improve.add_argument("--skills-arm", dest="skills_arm", action="store_true",
                         help="also induce skills from the training benches and bench the "
                         "test seeds with them (round-R/skills, round-R/test-skills)")
    improve.add_argument("--retrain-retriever", dest="retrain_retriever", action="store_true",
                         help="each round, train the retriever on the training benches' "
                         "solved steps (round-R/retriever) and bench with it; the table "
                         "shows the share of acted-on elements the test views showed")
    improve.add_argument("--no-replay-cache", dest="train_replay_cache", action="store_false",
                         help="ask the model again for training tasks an earlier round "
                         "solved, instead of replaying them (DIR/replay-cache)")
    improve.add_argument("--no-prune", dest="prune", action="store_false",
                         help="no pruning: entries keep the steps that ran without error "
                         "and changed the page")
    improve.add_argument("--prune-repeats", type=int, default=PruneOptions.repeats,
                         metavar="N", help="graph builds per trajectory for the pruner's vote")
    improve.add_argument("--no-embed", action="store_true",
                         help="lexical retrieval only (no embedder)")
    add_browser_flags(improve)
    add_model_flags(improve)
    add_agent_flags(improve, set_by_command=SET_BY_THE_LOOP)
    add_episode_flags(improve, timeout_default=f"{BenchOptions.episode_timeout_s:g}")
    add_log_flags(improve, level="auto", level_help=AUTO_LEVEL_HELP,
                  json_help="JSON log lines, no progress bar, even on a terminal")
    improve.set_defaults(handler=cmd_improve)


def cmd_improve(args: argparse.Namespace) -> int:
    from linewise.agent.text.embedders import embedder_for
    from linewise.apps.improve.loop import ImproveLoop
    from linewise.apps.improve.report import REPORT_FILE, TABLE_FILE, improve_table
    from linewise.apps.progress import ProgressDisplay
    from linewise.runtime.browser.chromium import BrowserConfig
    from linewise.runtime.tasks.loader import load_task_file, select_tasks

    if args.concurrency < 1 or args.rounds < 1 or args.prune_repeats < 1:
        raise ConfigError("--concurrency, --rounds and --prune-repeats must be at least 1")
    settings = settings_from_args(args)
    require_display(args, settings)
    tasks = select_tasks(load_task_file(args.tasks), args.task, args.max_steps)
    options = ImproveOptions(rounds=args.rounds, train_seeds=args.train_seeds,
                             test_seeds=args.test_seeds, baseline=args.baseline,
                             prune=args.prune, skills=args.skills_arm,
                             retrain_retriever=args.retrain_retriever,
                             replay_cache=args.train_replay_cache)
    progress = ProgressDisplay.for_terminal(log_json=args.log_json, log_level=args.log_level)
    try:
        loop = ImproveLoop(
            list(tasks), settings, args.out, options,
            browser_config=BrowserConfig.from_settings(settings.browser),
            bench_options=BenchOptions(
                concurrency=args.concurrency,
                episode_timeout_s=settings.episode_timeout_s or BenchOptions.episode_timeout_s),
            prune_options=PruneOptions(repeats=args.prune_repeats),
            embedder=None if args.no_embed else embedder_for(settings),
            progress=progress,
        )
        report = asyncio.run(loop.run())
    finally:
        progress.close()
    sys.stdout.write(improve_table(report))
    print(f"report: {args.out / REPORT_FILE}, {args.out / TABLE_FILE}")
    return 0
