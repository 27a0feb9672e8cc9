"""``linewise bench`` and ``linewise report``.

    linewise bench TASKS.yaml [--filter NAME]... [--seeds K] [--concurrency N] [--out DIR]
                   [--resume] [--retry-errors] [--backend local|ray]
                   [model, endpoint and browser flags]
    linewise report DIR [--max-rounds N] [--price-… $/1M]
    linewise report IMPROVE_DIR                            (an improve folder's rounds)
    linewise report DIR DIR… --out DIR [--label NAME]…   (several benches side by side)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime
from pathlib import Path

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.apps.bench.options import BenchOptions
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
    add_log_level_flag,
    add_model_flags,
    add_outage_flags,
    add_request_limit_flags,
    add_safety_flags,
    filter_choices,
    filter_name,
    settings_from_args,
)
from linewise.cli.interrupt import run_interruptible
from linewise.errors import ConfigError
from linewise.settings import LinewiseSettings

# What the commands run (the bench driver, Playwright, the reports) is imported by
# ``cmd_bench`` and ``cmd_report``, so that their ``--help`` appears at once.


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` and ``report`` to the ``linewise`` parser."""
    bench = sub.add_parser("bench", help=summary("bench"))
    bench.add_argument("tasks", type=Path, help="a YAML task file (browsergym: entries allowed)")
    bench.add_argument("--filter", dest="filters", action="append", type=filter_name,
                       default=[], metavar="NAME", help="observation filter to compare "
                       f"(repeatable; default {DEFAULT_FILTER}): {filter_choices()}")
    add_focus_flags(bench)
    bench.add_argument("--seeds", type=int, default=1, metavar="K",
                       help="seeds per task: MiniWoB seeds s..s+K-1, web tasks K runs")
    bench.add_argument("--concurrency", type=int, default=4, metavar="N",
                       help="episodes at once (default 4)")
    bench.add_argument("--out", type=Path, help="bench folder (default runs/bench-<timestamp>); "
                       "rerunning into it skips finished episodes")
    bench.add_argument("--resume", action="store_true",
                       help="continue the bench in --out (default: the latest runs/bench-*); "
                       "episodes that ended on an infrastructure fault run again")
    bench.add_argument("--retry-errors", action="store_true",
                       help="like --resume, and also run again every episode that ended "
                       "with an error of any kind (e.g. after fixing a bug)")
    bench.add_argument("--backend", choices=("local", "ray"), default="local",
                       help="local: one process; ray: Ray tasks (RAY_ADDRESS or a local Ray)")
    bench.add_argument("--task", action="append", default=[], metavar="ID",
                       help="run only these task ids (repeatable)")
    bench.add_argument("--max-steps", type=int, help="override every task's step limit")
    add_request_limit_flags(bench)
    add_outage_flags(bench)
    add_browser_flags(bench)
    add_model_flags(bench)
    add_agent_flags(bench)
    add_episode_flags(bench, timeout_default=f"{BenchOptions.episode_timeout_s:g}")
    add_safety_flags(bench)
    bench.add_argument("--no-cost-gate", dest="cost_gate", action="store_const", const=False,
                       help="always run the retriever (the cost gate skips it on trees too "
                       "small to pay for it, e.g. most MiniWoB++ pages)")
    bench.add_argument("--no-report", action="store_true", help="do not write the report")
    bench.add_argument("--allow-memory-overlap", action="store_true",
                       help="run even when --memory was built from episodes of this bench "
                       "(a training run; flagged in the output and bench.json)")
    _add_report_flags(bench)
    add_log_flags(bench, level="auto", level_help="auto: WARNING under the progress bar, "
                  "else INFO", json_help="JSON log lines, no progress bar, even on a terminal")
    bench.set_defaults(handler=cmd_bench)

    report = sub.add_parser("report", help=summary("report"))
    report.add_argument("dirs", type=Path, nargs="+", metavar="DIR",
                        help="a bench folder (holding results.jsonl): its report goes into "
                        "it; an improve folder: its rounds report (improve.md, report.md, "
                        ".html, .json) goes into it; several benches: each gets its own, "
                        "and their comparison goes to --out")
    report.add_argument("--out", type=Path, metavar="DIR",
                        help="where the comparison of several benches goes (report.md, "
                        ".html, .json and view/index.html, one viewer index over them)")
    report.add_argument("--label", dest="labels", action="append", default=[],
                        metavar="NAME", help="a bench's name in the comparison, one per "
                        "DIR in order (default: the folder names)")
    _add_report_flags(report)
    add_log_level_flag(report, "WARNING")
    report.set_defaults(handler=cmd_report)


def _add_report_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-rounds", type=float, metavar="N",
                        help="F-AE's Max_Rounds (default: each group's largest max_steps)")
    defaults = Prices()
    for name, help_text in (
        ("action-input", "action model input"),
        ("action-output", "action model output"),
        ("retriever-input", "retriever input"),
        ("retriever-output", "retriever output"),
    ):
        default = getattr(defaults, name.replace("-", "_"))
        parser.add_argument(f"--price-{name}", type=float, metavar="USD",
                            help=f"$ per 1M {help_text} tokens (default {default:g})")


def prices_from(args: argparse.Namespace, settings: LinewiseSettings | None = None) -> Prices:
    """Flags first, then the filter settings' prices (the cost gate's and the budget's),
    then defaults."""
    values: dict[str, float] = {}
    if settings is not None:
        values = Prices.of(settings.filter).model_dump()
    for field in Prices.model_fields:
        flag = getattr(args, f"price_{field}", None)
        if flag is not None:
            values[field] = flag
    return Prices(**values)


def cmd_report(args: argparse.Namespace) -> int:
    from linewise.apps.bench.report import write_report
    from linewise.apps.compare.benches import is_bench, is_improve
    from linewise.apps.compare.report import write_comparison, write_improve_report

    if len(args.dirs) == 1:
        if args.out is not None or args.labels:
            raise ConfigError("--out and --label are for comparing several benches; "
                              f"`linewise report {args.dirs[0]}` writes into that folder")
        folder = args.dirs[0]
        if folder.is_dir() and not is_bench(folder) and is_improve(folder):
            _, written = write_improve_report(folder, prices_from(args), args.max_rounds)
        else:
            _, written = write_report(folder, prices_from(args), args.max_rounds)
    else:
        if args.out is None:
            raise ConfigError(f"comparing {len(args.dirs)} benches: give --out DIR, the "
                              "folder the comparison goes to (each bench's own report is "
                              "written into it as `linewise report DIR` writes it)")
        _, written = write_comparison(args.dirs, args.labels, args.out, prices_from(args),
                                      args.max_rounds)
    for path in written:
        print(path)
    return 0


def _out_dir(args: argparse.Namespace) -> Path:
    from linewise.apps.bench.manifest import MANIFEST_FILE

    if args.out is not None:
        return Path(args.out)
    if args.resume or args.retry_errors:
        found = sorted(Path("runs").glob(f"bench-*/{MANIFEST_FILE}"))
        if not found:
            raise ConfigError("--resume: no runs/bench-* folder to resume; give --out DIR")
        return found[-1].parent
    return Path("runs") / datetime.now().strftime("bench-%Y%m%d-%H%M%S")


def cmd_bench(args: argparse.Namespace) -> int:
    from linewise.apps.bench.driver import run_bench
    from linewise.apps.bench.plan import expand
    from linewise.apps.bench.progress import make_progress
    from linewise.apps.bench.report import write_report
    from linewise.apps.bench.report_data import (
        errors_text,
        infra_text,
        overall,
        rate_text,
        replay_line,
    )
    from linewise.runtime.browser.chromium import BrowserConfig
    from linewise.runtime.log import configure_logging
    from linewise.runtime.tasks.loader import load_task_file, select_tasks

    if args.seeds < 1:
        raise ConfigError("--seeds must be at least 1")
    if args.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    settings = settings_from_args(args)
    require_display(args, settings)
    tasks = select_tasks(load_task_file(args.tasks), args.task, args.max_steps)
    specs = expand(tasks, args.filters or [settings.filter.name], args.seeds)
    out_dir = _out_dir(args)
    options = BenchOptions(
        concurrency=args.concurrency,
        episode_timeout_s=settings.episode_timeout_s or BenchOptions.episode_timeout_s,
    )

    rich = sys.stderr.isatty() and not args.log_json
    level = args.log_level if args.log_level != "auto" else ("WARNING" if rich else "INFO")
    configure_logging(json_lines=True if args.log_json else None, level=level)
    progress = make_progress(rich, level)

    interruptible = asyncio.run(run_interruptible(lambda stop: run_bench(
        specs, settings, BrowserConfig.from_settings(settings.browser), out_dir, options,
        backend=args.backend, progress=progress, resume=args.resume or args.retry_errors,
        retry_errors=args.retry_errors, argv=sys.argv, stop=stop,
        allow_memory_overlap=args.allow_memory_overlap,
    )))
    outcome = interruptible.result
    if interruptible.interrupted:
        print(f"{interruptible.stopped_by}: stopped episodes are rerun by --resume "
              f"(--out {out_dir})")
    if outcome is None:
        return interruptible.exit_code
    mine = {s.key for s in specs}
    results = [r for r in outcome.results if r.key in mine]
    summary = overall(results, prices_from(args, settings))
    print(f"{len(results)}/{len(specs)} episodes in {out_dir} (ran {outcome.ran}, "
          f"recovered {outcome.recovered}, already done {outcome.skipped}); "
          f"success {rate_text(summary)} % of {summary.judged} agent outcomes; "
          f"infrastructure endings {infra_text(summary)}"
          + (f"; assisted by a person (not counted) {summary.assisted}"
             if summary.assisted else "")
          + (f"; actions replaced by code (not counted) {summary.hooked}"
             if summary.hooked else ""))
    if (replays := replay_line(summary)) is not None:
        print(replays)
    if outcome.memory_overlap:
        print(f"WARNING: the memory was built from {len(outcome.memory_overlap)} episodes of "
              "this bench: its success rate is not a clean test")
    if outcome.budget_stop is not None:
        print(f"stopped by the run budget: {outcome.budget_stop}; {outcome.not_started} "
              "episodes not started (raise the limit and rerun with --resume to run them)")
    if summary.errors or summary.step_errors:
        print("errors: " + errors_text(summary))
    if outcome.stopped:
        print(f"stopped early: {outcome.stopped}; continue with --resume --out {out_dir}")
    elif summary.infrastructure:
        print(f"run them again with: linewise bench {args.tasks} --resume --out {out_dir}")
    if not args.no_report:
        _, written = write_report(out_dir, prices_from(args, settings), args.max_rounds)
        print("report: " + ", ".join(str(p) for p in written))
    if interruptible.interrupted:
        return interruptible.exit_code
    return exit_code_for((r.outcome for r in results), stopped_early=outcome.stopped is not None)
