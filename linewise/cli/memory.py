"""``linewise memory build`` and ``linewise memory show``: the experience memory.

    linewise memory build RUN_DIR... --out MEMORY.jsonl [--pruned DATASET_DIR]... [--no-embed]
    linewise memory show MEMORY.jsonl [--goal TEXT [--page FILE] [--task-id ID]]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from linewise.cli.commands import summary
from linewise.cli.exit_codes import EXIT_NOTHING_BUILT
from linewise.cli.flags import add_log_level_flag, default_of, settings_from_args
from linewise.errors import ConfigError
from linewise.settings import LinewiseSettings

if TYPE_CHECKING:
    from linewise.agent.text.embedders import Embedder

# What the commands run (the embedder, the memory) is imported by the command
# functions, so that their ``--help`` appears at once.


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = sub.add_parser("memory", help=summary("memory"))
    actions = memory.add_subparsers(dest="memory_command", required=True,
                                    help="build: make a memory; show: look into one")
    build = actions.add_parser(
        "build", help="successful episodes of run or bench folders -> memory entries",
        description="Keep the successful episodes, reduced to the pruner's kept steps where "
        "`linewise prune` judged them (--pruned), else to the steps that ran without error "
        "and changed the page.")
    build.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                       help="run or bench folders (searched recursively)")
    build.add_argument("--out", type=Path, required=True, metavar="MEMORY.jsonl",
                       help="the memory file to write")
    build.add_argument("--pruned", action="append", type=Path, default=[],
                       metavar="DATASET_DIR", help="a `linewise prune --out` folder whose "
                       "verdicts apply (repeatable)")
    build.add_argument("--no-embed", action="store_true",
                       help="no vectors: retrieval of this memory is lexical only")
    add_log_level_flag(build, "WARNING")
    build.set_defaults(handler=cmd_build)

    show = actions.add_parser("show", help="list a memory's entries, or the examples an "
                              "episode would be shown")
    show.add_argument("memory", type=Path, metavar="MEMORY.jsonl", help="the memory file")
    show.add_argument("--goal", help="show the examples retrieved for this goal")
    show.add_argument("--page", type=Path, metavar="FILE", help="the first page's AXTree text")
    show.add_argument("--task-id", default="", help="the running task id (its entries, same "
                      "seed, are left out)")
    show.add_argument("--memory-k", type=int, metavar="K",
                      help=f"examples retrieved, at most ({default_of('memory_k')})")
    show.add_argument("--memory-budget", type=int, metavar="N",
                      help=f"tokens the examples may take ({default_of('memory_budget')})")
    add_log_level_flag(show, "WARNING")
    show.set_defaults(handler=cmd_show)


def _embedder(settings: LinewiseSettings) -> Embedder:
    from linewise.agent.text.embedders import embedder_for

    return embedder_for(settings)


def cmd_build(args: argparse.Namespace) -> int:
    """Build and write the memory; exit 7, writing nothing, when no entry could be made
    (an empty memory would be used as if it held something)."""
    from linewise.agent.experience.store import write_memory
    from linewise.apps.memory.build import build_memory
    from linewise.apps.pruning.export import TRAJECTORIES_FILE
    from linewise.apps.pruning.trajectory import require_episodes

    require_episodes(args.runs)  # before anything is written
    for folder in args.pruned:
        if not (folder / TRAJECTORIES_FILE).is_file():
            raise ConfigError(f"--pruned {folder}: not a dataset of linewise prune (no "
                              f"{TRAJECTORIES_FILE} in it)")
    settings = settings_from_args(args, resolve=False)
    embedder = None if args.no_embed else _embedder(settings)
    entries, report = asyncio.run(build_memory(args.runs, args.pruned, embedder=embedder))
    skipped = ", ".join(f"{why} {n}" for why, n in sorted(report.skipped.items())) or "none"
    print(f"{report.entries} entries ({report.from_pruner} from the pruner) from "
          f"{report.successful} successful of {report.episodes} episodes; skipped: {skipped}")
    if not entries:
        why = ("none of them succeeded" if not report.successful else
               "no successful one kept a step (an entry needs a step that ran without "
               "error and changed the page)")
        print(f"linewise: error: no memory entry from {report.episodes} episodes: {why}; "
              f"{args.out} was not written", file=sys.stderr)
        return EXIT_NOTHING_BUILT
    write_memory(args.out, entries)
    if report.withheld:
        print(f"instruction-like text (written for an agent, or a link to another site): "
              f"{report.withheld} steps left out or shown without their thought or the "
              "element's name")
    print(f"embedding: {report.embedder or report.embedding_note}")
    print(f"memory: {args.out}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from linewise.agent.experience.load import memory_for
    from linewise.agent.experience.retrieve import ExperienceMemory
    from linewise.agent.experience.store import read_memory

    if args.goal is None:
        for entry in read_memory(args.memory):
            seed = "-" if entry.seed is None else entry.seed
            print(f"{entry.id}\t{entry.task}\tseed {seed}\t{len(entry.steps)} steps"
                  f"{' (pruned)' if entry.pruned else ''}\t{entry.goal[:80]!r}")
        return 0
    settings = settings_from_args(args, resolve=False)  # the positional sets agent.memory
    memory = memory_for(settings)
    assert isinstance(memory, ExperienceMemory)
    page = args.page.read_text(encoding="utf-8") if args.page is not None else ""
    examples = asyncio.run(memory.examples(args.task_id, args.goal, page))
    print(examples.shown.model_dump_json(indent=2))
    print(examples.text)
    return 0
