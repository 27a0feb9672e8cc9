"""``linewise prune`` and ``linewise mine``: argument definitions and command functions."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from linewise.apps.pruning.options import PruneOptions
from linewise.cli.commands import summary
from linewise.cli.exit_codes import EXIT_NOTHING_BUILT
from linewise.cli.flags import (
    AUTO_LEVEL_HELP,
    add_log_flags,
    add_log_level_flag,
    add_model_flags,
    refuse_flag,
    settings_from_args,
)
from linewise.errors import ConfigError, GraphError

if TYPE_CHECKING:
    from linewise.apps.pruning.export import PruneStats

# What the commands run (the pruner, the model clients) is imported by ``cmd_prune``
# and ``cmd_mine``, so that their ``--help`` appears at once.

DEFAULTS = PruneOptions()


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``prune`` and ``mine`` to the ``linewise`` subcommands."""
    prune = sub.add_parser(
        "prune",
        help=summary("prune"),
        description="Build state graphs of successful episodes with an LLM, keep the "
        "necessary steps (minimum necessary DAG, majority vote), rewrite the thoughts that "
        "lost their predecessor, and export chat-messages JSONL.",
    )
    prune.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                       help="run folders of `linewise run` or `linewise bench` (searched "
                       "recursively for episode folders)")
    prune.add_argument("--out", type=Path, required=True, metavar="DATASET_DIR",
                       help="where pruned.jsonl, hybrid.jsonl, graphs/ and stats.json go")
    prune.add_argument("--repeats", type=int, default=DEFAULTS.repeats,
                       help="graph builds per trajectory for the majority vote "
                       f"(default {DEFAULTS.repeats})")
    prune.add_argument("--mode", choices=("efficiency", "hybrid"), default="hybrid",
                       help="efficiency: write pruned.jsonl only; hybrid (default): also "
                       "hybrid.jsonl with the trajectories that had nothing to prune")
    prune.add_argument("--pass-rate", metavar="LOW:HIGH",
                       help="rejection sampling: keep only tasks whose pass rate over their "
                       "episodes is in (LOW, HIGH]; the paper uses 0:0.5 (default: off)")
    prune.add_argument("--include-failed", action="store_true",
                       help="also prune unsuccessful episodes (default: successful only)")
    prune.add_argument("--limit", type=int, metavar="N",
                       help="prune at most N trajectories (after filtering)")
    prune.add_argument("--concurrency", type=int, default=DEFAULTS.concurrency,
                       help=f"trajectories processed at once (default {DEFAULTS.concurrency})")
    prune.add_argument("--extract-temperature", type=float,
                       default=DEFAULTS.extract_temperature,
                       help="extractor sampling temperature; above 0 so that the repeats "
                       f"of the vote are independent (default {DEFAULTS.extract_temperature})")
    prune.add_argument("--extractor-obs-tokens", type=int, metavar="N",
                       default=DEFAULTS.max_obs_tokens,
                       help="tokens of each step's page shown to the extractor "
                       f"(default {DEFAULTS.max_obs_tokens}; the rest is cut with a marker)")
    # Its name until issue 38: it meant another thing than run's and bench's
    # --max-obs-tokens (the truncate filter's budget), so it got a name of its own.
    refuse_flag(prune, "--max-obs-tokens", "prune calls it --extractor-obs-tokens "
                "(--max-obs-tokens of run and bench is the truncate filter's budget)")
    prune.add_argument("--build-retries", type=int, default=DEFAULTS.build_retries,
                       help="re-asks with the validation error after an invalid "
                       f"extractor answer (default {DEFAULTS.build_retries})")
    prune.add_argument("--candidates", type=int, default=DEFAULTS.candidates,
                       help="rewrite candidates per rewritten thought "
                       f"(default {DEFAULTS.candidates})")
    prune.add_argument("--extractor-base-url", metavar="URL",
                       help="endpoint of the extractor, which builds the graphs and drafts "
                       "the rewritten thoughts (default: the --base-url endpoint)")
    prune.add_argument("--extractor-model", help="model name at --extractor-base-url")
    add_model_flags(prune, model="base", agent=False,
                    role="the agent's own model, which picks among the rewritten thoughts "
                    "by their perplexity, and the extractor unless --extractor-base-url")
    add_log_flags(prune, level="auto", level_help=AUTO_LEVEL_HELP,
                  json_help="JSON log lines, no progress bar, even on a terminal")
    prune.set_defaults(handler=cmd_prune)

    mine = sub.add_parser(
        "mine", help=summary("mine"),
        description='GRAPH.json: {"nodes": [{"id": "I0", "kind": "info"}, {"id": "A1", '
        '"kind": "action"}, ...], "edges": [["I0", "A1"], ...], "source": "I0", '
        '"sink": "A7"}; extra fields are allowed.',
    )
    mine.add_argument("graph", type=Path, metavar="GRAPH.json",
                      help="a state graph, as prune writes into its graphs/ folder")
    add_log_level_flag(mine, "WARNING")
    mine.set_defaults(handler=cmd_mine)


def cmd_mine(args: argparse.Namespace) -> int:
    """Print A*, one id per line. A broken graph is a usage error (exit 2)."""
    from linewise.apps.pruning.graph import load_graph
    from linewise.apps.pruning.miner import necessary_actions

    try:
        actions = necessary_actions(load_graph(args.graph))
    except GraphError as exc:
        message = str(exc)
        if str(args.graph) not in message:
            message = f"{args.graph}: {message}"
        raise ConfigError(message) from exc
    for action_id in actions:
        print(action_id)
    return 0


def parse_pass_rate(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        low_text, high_text = text.split(":")
        low, high = float(low_text), float(high_text)
    except ValueError as exc:
        raise ConfigError(f"--pass-rate must be LOW:HIGH, e.g. 0:0.5, got {text!r}") from exc
    if not 0 <= low < high <= 1:
        raise ConfigError(f"--pass-rate needs 0 <= LOW < HIGH <= 1, got {text!r}")
    return low, high


def cmd_prune(args: argparse.Namespace) -> int:
    """Run the pipeline, showing each verdict as it comes; print the counts of stats.json,
    failures first. Exit 7 when no trajectory made it into the dataset."""
    from linewise.apps.progress import ProgressDisplay
    from linewise.apps.pruning.pipeline import run_prune
    from linewise.apps.pruning.trajectory import require_episodes

    if args.repeats < 1:
        raise ConfigError("--repeats must be at least 1")
    if args.candidates < 1:
        raise ConfigError("--candidates must be at least 1")
    if args.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if bool(args.extractor_base_url) != bool(args.extractor_model):
        raise ConfigError("--extractor-base-url and --extractor-model go together")
    options = PruneOptions(
        repeats=args.repeats,
        mode=args.mode,
        pass_rate=parse_pass_rate(args.pass_rate),
        include_failed=args.include_failed,
        limit=args.limit,
        concurrency=args.concurrency,
        extract_temperature=args.extract_temperature,
        max_obs_tokens=args.extractor_obs_tokens,
        build_retries=args.build_retries,
        candidates=args.candidates,
        extractor_base_url=args.extractor_base_url,
        extractor_model=args.extractor_model,
    )
    require_episodes(args.runs)  # before anything is written or started
    settings = settings_from_args(args)
    progress = ProgressDisplay.for_terminal(log_json=args.log_json, log_level=args.log_level)
    try:
        stats = asyncio.run(run_prune(args.runs, args.out, settings, options,
                                      progress=progress))
    finally:
        progress.close()
    for line in summary_lines(stats, args.out):
        print(line)
    print(f"Dataset in {args.out}/ (stats.json, trajectories.jsonl, graphs/); "
          f"{stats.elapsed_s:.1f} s")
    if stats.agreed == 0:
        print(f"linewise: error: nothing to train on in {args.out}: "
              f"{why_nothing_agreed(stats)}", file=sys.stderr)
        return EXIT_NOTHING_BUILT
    return 0


def summary_lines(stats: PruneStats, out: Path) -> list[str]:
    """What became of the episodes, failures named: "built 0" alone hid two failed
    builds."""
    from linewise.apps.pruning.export import TRAJECTORIES_FILE

    beyond = stats.episodes_found - stats.skipped - stats.trajectories_in
    lines = [f"episodes {stats.episodes_found}: {stats.skipped} left out before pruning, "
             f"{stats.trajectories_in} to prune"
             + (f", {beyond} beyond --limit" if beyond > 0 else "")]
    if stats.trajectories_in:
        lines.append(
            f"trajectories {stats.trajectories_in}: {stats.pruned} pruned, {stats.unpruned} "
            f"with nothing to prune, {stats.discarded} discarded (the runs disagreed), "
            f"{stats.build_failed} failed (no graph could be built)")
    if stats.agreed:
        lines.append(f"kept: rounds {stats.rounds_before} -> {stats.rounds_after}, tokens "
                     f"{stats.tokens_before} -> {stats.tokens_after}")
    if stats.build_failed or stats.discarded or stats.skipped:
        lines.append(f"why, for each: {out / TRAJECTORIES_FILE} (status, reason, errors)")
    return lines


def why_nothing_agreed(stats: PruneStats) -> str:
    if not stats.trajectories_in:
        return (f"none of its {stats.episodes_found} episodes could be pruned ("
                "unsuccessful, unfinished or left out by --pass-rate; --include-failed "
                "takes unsuccessful ones)")
    failed = [f"{n} {what}" for n, what in ((stats.build_failed, "failed to build"),
                                            (stats.discarded, "discarded by the vote"))
              if n]
    return f"no trajectory of {stats.trajectories_in} was kept ({', '.join(failed)})"
