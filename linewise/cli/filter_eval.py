"""``linewise filter-eval CASES``: score observation filters on saved cases, no agent."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from linewise.agent.filters.registry import FilterMaker, filter_names
from linewise.cli.commands import summary
from linewise.cli.flags import (
    add_focus_flags,
    add_log_flags,
    add_max_obs_tokens_flag,
    add_model_flags,
    add_view_budget_flag,
    filter_choices,
    filter_name,
    settings_from_args,
)

if TYPE_CHECKING:
    from linewise.apps.filter_eval import CaseScore

# What the command runs (the filters, the model clients) is imported by
# ``cmd_filter_eval``, so that ``linewise filter-eval --help`` appears at once.


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evaluate = sub.add_parser("filter-eval", help=summary("filter-eval"))
    evaluate.add_argument("cases", type=Path, nargs="+",
                          help="case files (.json/.jsonl) or folders of them: "
                          "tasks/filter-cases/heldout2.*.json scores one held-out set alone")
    evaluate.add_argument("--filter", dest="filters", action="append", type=filter_name,
                          default=[], metavar="NAME",
                          help="filters to score (repeatable; default: every public one): "
                          f"{filter_choices()}")
    add_max_obs_tokens_flag(evaluate)
    # Off unless asked (False is a given value): the score is the filter's, not the gate's.
    evaluate.add_argument("--cost-gate", action="store_true",
                          help="let the cost gate skip retrieval (off: score the filter itself)")
    evaluate.add_argument("--per-case", action="store_true",
                          help="also print one row per case and filter (gold found, latency)")
    evaluate.add_argument("--out", type=Path,
                          help="append every case's scores to this JSON-lines file as they come")
    add_focus_flags(evaluate)
    add_model_flags(evaluate)
    add_view_budget_flag(evaluate)
    add_log_flags(evaluate, level="WARNING")
    evaluate.set_defaults(handler=cmd_filter_eval)


def cmd_filter_eval(args: argparse.Namespace) -> int:
    import structlog

    from linewise.apps.filter_eval import (
        LARGE_PAGE_LINES,
        evaluate_filters,
        format_case_table,
        format_kind_table,
        format_table,
        load_cases,
        summarize,
        summarize_kinds,
    )
    from linewise.runtime.filter_choice import build_filter_maker, resolve_filter
    from linewise.runtime.models.factory import open_endpoints
    from linewise.runtime.models.profiles import resolve_profile

    log = structlog.get_logger(__name__)
    cases = load_cases(*args.cases)
    names: list[str] = args.filters or filter_names()
    settings = settings_from_args(args)
    out = args.out.open("w", encoding="utf-8") if args.out else None

    def record(score: CaseScore) -> None:
        log.info("case scored", case=score.case_id, filter=score.filter,
                 reduction=round(score.reduction, 3), found=score.gold_found,
                 gold=score.gold_total, fallback=score.fallback_reason)
        if out is not None:
            out.write(score.model_dump_json() + "\n")
            out.flush()

    async def run() -> dict[str, list[CaseScore]]:
        # Filters that use a retriever when the run has one are scored with it, as
        # they run beside the action model.
        chosen = [resolve_filter(name) for name in names]
        needs_retriever = any(f.needs_retriever(settings.filter, endpoint_opened=True)
                              for f in chosen)
        async with open_endpoints(settings, action=False, retriever=needs_retriever) as (
            _, retriever
        ):
            # No action model runs, but filters are sized for the one a run would use.
            acting = resolve_profile(settings.action, local=settings.local)
            makers: dict[str, FilterMaker] = {
                f.name: build_filter_maker(settings, f, retriever=retriever,
                                           action_profile=acting)
                for f in chosen
            }
            log.info("evaluating filters", filters=names, cases=len(cases))
            return await evaluate_filters(cases, makers, record)

    try:
        results = asyncio.run(run())
    finally:
        if out is not None:
            out.close()
    print(format_table([summarize(name, results[name]) for name in names]))
    kinds = [k for name in names for k in summarize_kinds(name, results[name])]
    if kinds:
        print(f"\nBy goal kind, pages over {LARGE_PAGE_LINES} lines:")
        print(format_kind_table(kinds))
    if args.per_case:
        print()
        print(format_case_table([s for name in names for s in results[name]]))
    if args.out:
        print(f"\nPer-case scores in {args.out} (one JSON line per case and filter)")
    return 0
