"""The bench report's contents: the numbers (``Report``) and the table cells and
notes that every rendering of them shares (``report_markdown``, ``report_html``).

Everything is computed from ``results.jsonl`` alone (each line carries its per-step
observation sizes), so a report can be rebuilt anywhere, at any time, from that file.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from linewise.agent.filters.cost_gate import Prices
from linewise.apps.bench.metrics import GroupMetrics, grouped, summarize
from linewise.apps.bench.results import RESULTS_FILE, EpisodeResult, read_results
from linewise.errors import ConfigError


class Report(BaseModel):
    bench: str
    generated_at: str
    episodes: int
    prices: Prices
    max_rounds: float | None
    overall: list[GroupMetrics]
    """Per agent and filter, over every benchmark."""
    by_benchmark: list[GroupMetrics]
    by_task: list[GroupMetrics]
    blocked_navigations: int = 0
    """Page loads the navigation policy refused, over every episode."""


def build_report(results: list[EpisodeResult], bench: str, prices: Prices,
                 max_rounds: float | None = None) -> Report:
    return Report(
        bench=bench,
        generated_at=datetime.now().isoformat(timespec="seconds"),
        episodes=len(results),
        prices=prices,
        max_rounds=max_rounds,
        overall=grouped(results, lambda r: (r.agent, r.filter), ("agent", "filter"),
                        prices, max_rounds),
        by_benchmark=grouped(results, lambda r: (r.benchmark, r.agent, r.filter),
                             ("benchmark", "agent", "filter"), prices, max_rounds),
        by_task=grouped(results, lambda r: (r.base_task, r.filter, r.agent),
                        ("task", "filter", "agent"), prices, max_rounds),
        blocked_navigations=sum(r.blocked_navigations for r in results),
    )


def load_results(out_dir: Path) -> list[EpisodeResult]:
    path = out_dir / RESULTS_FILE
    if not path.exists():
        raise ConfigError(f"{out_dir} holds no {RESULTS_FILE}: is it a bench folder?")
    return read_results(path)


def overall(results: list[EpisodeResult], prices: Prices) -> GroupMetrics:
    """Every episode as one group (the one-line summary a bench prints at its end)."""
    return summarize(results, {"all": "all"}, prices)


# ----------------------------------------------------------------------- table cells


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def success_text(g: GroupMetrics) -> str:
    if g.success_rate is None:
        return "-"
    if g.success_se is None:  # a single judged episode: a rate, but no error to give
        return f"{100 * g.success_rate:.1f}"
    return f"{100 * g.success_rate:.1f} ± {100 * g.success_se:.1f}"


def infra_text(g: GroupMetrics) -> str:
    """Infrastructure endings, by kind: shown beside the success rate, never in it."""
    if not g.infrastructure:
        return "0"
    return f"{g.infrastructure} (" + ", ".join(
        f"{kind} {count}" for kind, count in g.infra_kinds.items()) + ")"


def errors_text(g: GroupMetrics) -> str:
    """Episodes that ended on an error, by kind; then steps whose action failed or
    whose answer held no action (the episode went on after them)."""
    parts = [f"{kind} {count}" for kind, count in g.errors.items()]
    parts += [f"{count} {kind} error step{'s' if count != 1 else ''}"
              for kind, count in g.step_errors.items()]
    return ", ".join(parts) or "-"


def steps_text(g: GroupMetrics) -> str:
    """Mean steps over agent outcomes; none when the group has none (all assisted, say)."""
    return f"{g.steps:.1f}" if g.agent_episodes else "-"


def tokens(value: float) -> str:
    return f"{value:,.0f}"


def group_columns(g: GroupMetrics) -> list[str]:
    """The metric cells shared by the agent/filter and benchmark tables."""
    return [
        str(g.episodes), success_text(g), infra_text(g), str(g.assisted),
        "-" if g.f_ae is None else f"{g.f_ae:.3f}",
        steps_text(g), pct(g.reduction),
        tokens(g.action_tokens_per_step), tokens(g.retriever_tokens_per_step),
        tokens(g.action_tokens_per_episode), tokens(g.retriever_tokens_per_episode),
        f"${g.cost_per_episode:.4f}", f"{g.wall_s:.1f}",
        f"{g.repeats_escaped} / {g.repeats_kept}", errors_text(g),
    ]


GROUP_HEADER = [
    "episodes", "success % ± SE", "infra endings", "assisted", "F-AE", "steps", "reduction %",
    "action tok/step", "retriever tok/step", "action tok/episode", "retriever tok/episode",
    "cost/episode", "wall s/episode", "loops escaped / kept", "errors",
]
TASK_HEADER = ["task", "filter", "agent", "episodes", "success % ± SE", "infra endings",
               "assisted", "steps",
               "reduction %", "tokens/episode", "errors"]


def task_columns(g: GroupMetrics) -> list[str]:
    return [
        g.label["task"], g.label["filter"], g.label["agent"], str(g.episodes),
        success_text(g), infra_text(g), str(g.assisted), steps_text(g), pct(g.reduction),
        tokens(g.action_tokens_per_episode + g.retriever_tokens_per_episode), errors_text(g),
    ]


def preamble(report: Report) -> list[str]:
    p = report.prices
    rounds = (f"{report.max_rounds:g}" if report.max_rounds
              else "each group's largest step budget (max_steps)")
    return [
        f"{report.episodes} episodes. Generated {report.generated_at}.",
        "Success rate with its standard error (±SE) as in LineRetriever's Table 1, over "
        "the episodes that ended with an agent outcome; episodes that ended on an "
        "infrastructure fault (model endpoint, browser, runtime) are counted beside it "
        "under 'infra endings', never in it (`linewise bench --resume` runs them again); "
        "so are episodes a person assisted at the step-through prompt (overrode, skipped "
        "or did a step by hand: 'assisted'), whose result is not the agent's alone; "
        "errors: episodes that ended on an error by kind, then steps whose action failed "
        "or whose answer held no action; "
        "reduction is 1 − shown/full observation tokens per step, averaged per episode "
        "then over episodes; F-AE is WebClipper's accuracy–efficiency score with "
        f"Max_Rounds = {rounds}.",
        f"Cost at ${p.action_input:g}/${p.action_output:g} per 1M action input/output "
        f"tokens and ${p.retriever_input:g}/${p.retriever_output:g} per 1M retriever "
        "input/output tokens.",
        "Loops: answers that repeated an action which had changed nothing on the page; "
        "escaped when a re-ask chose another action, kept when every re-ask repeated it.",
        f"Navigation policy: {report.blocked_navigations} page load(s) blocked "
        "(steps.jsonl `blocked` says which, why and who started them).",
    ]
