"""The bench report's contents: the numbers (``Report``) and the table cells and
notes that every rendering of them shares (``report_markdown``, ``report_html``).

Everything is computed from ``results.jsonl`` alone (each line carries its per-step
observation sizes), so a report can be rebuilt anywhere, at any time, from that file.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.apps.bench.metrics import GroupMetrics, ReplayMetrics, grouped, summarize
from linewise.apps.bench.results import RESULTS_FILE, EpisodeResult, read_results
from linewise.apps.bench.state import BenchState, StateLine, state_lines
from linewise.errors import ConfigError


class Report(BaseModel):
    bench: str
    generated_at: str
    episodes: int
    """Results lines: each episode once, as its last attempt ended."""
    state: BenchState
    """What the report covers of the plan, why the bench stopped, how to resume."""
    prices: Prices
    max_rounds: float | None
    overall: list[GroupMetrics]
    """Per agent and filter, over every benchmark."""
    by_benchmark: list[GroupMetrics]
    by_task: list[GroupMetrics]
    blocked_navigations: int = 0
    """Page loads the navigation policy refused, over every episode."""
    refused_connections: int = 0
    """Other requests it refused (sub-resources, sockets, redirect hops)."""


def build_report(results: list[EpisodeResult], bench: str, prices: Prices,
                 max_rounds: float | None = None, state: BenchState | None = None) -> Report:
    """``state``: the bench's (``state.bench_state``); without one the plan is unknown."""
    return Report(
        bench=bench,
        generated_at=datetime.now().isoformat(timespec="seconds"),
        episodes=len(results),
        state=state or BenchState(planned=None, ran=len(results), left=0,
                                  rerun=sum(not r.is_final for r in results)),
        prices=prices,
        max_rounds=max_rounds,
        overall=grouped(results, lambda r: (r.agent, r.filter), ("agent", "filter"),
                        prices, max_rounds),
        by_benchmark=grouped(results, lambda r: (r.benchmark, r.agent, r.filter),
                             ("benchmark", "agent", "filter"), prices, max_rounds),
        by_task=grouped(results, lambda r: (r.base_task, r.filter, r.agent),
                        ("task", "filter", "agent"), prices, max_rounds),
        blocked_navigations=sum(r.blocked_navigations for r in results),
        refused_connections=sum(r.refused_connections for r in results),
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


def rate_text(g: GroupMetrics) -> str:
    """The success rate ± its standard error, in %."""
    if g.success_rate is None:
        return "-"
    if g.success_se is None:  # a single judged episode: a rate, but no error to give
        return f"{100 * g.success_rate:.1f}"
    return f"{100 * g.success_rate:.1f} ± {100 * g.success_se:.1f}"


def success_text(g: GroupMetrics) -> str:
    """The rate with the number of episodes it is over: 100.0 ± 0.0 of 2 is not of 200."""
    rate = rate_text(g)
    return rate if g.success_rate is None else f"{rate} (n={g.judged})"


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


def other_text(g: GroupMetrics) -> str:
    """Endings of a budget and of a stop: counted, never judged."""
    return f"{g.budget} / {g.stopped}"


def assisted_text(g: GroupMetrics) -> str:
    """The episodes not the agent's alone: a person's help, then code's (a hook that
    replaced actions), which the column names apart so that neither passes for the other."""
    return f"{g.assisted} + {g.hooked} by code" if g.hooked else str(g.assisted)


def tokens(value: float) -> str:
    return f"{value:,.0f}"


def has_replays(report: Report) -> bool:
    """Whether any episode followed a recorded program: only then do the tables have
    replay columns and the report a replay section."""
    return any(g.replay is not None for g in report.overall)


REPLAY_HEADER = ["replayed", "replayed ok", "replayed %", "healed", "healed ok", "healed %"]
"""The replays' outcome columns, beside the agent's: episodes, successes, success rate."""


def replay_columns(g: GroupMetrics) -> list[str]:
    m = g.replay or ReplayMetrics()
    return [str(m.replayed), str(m.replayed_successes), pct(m.replayed_rate),
            str(m.healed), str(m.healed_successes), pct(m.healed_rate)]


def has_other_endings(report: Report) -> bool:
    """Whether a budget or a stop ended any episode: only then do the tables have a
    column for them."""
    return any(g.budget or g.stopped for g in report.overall)


def group_columns(g: GroupMetrics, replays: bool = False, others: bool = False) -> list[str]:
    """The metric cells shared by the agent/filter and benchmark tables (with the
    replays' columns after ``assisted`` when ``replays``, and the budget and stopped
    endings' before them when ``others``)."""
    return [
        str(g.episodes), str(g.agent_episodes), success_text(g), infra_text(g),
        assisted_text(g), *([other_text(g)] if others else []),
        *(replay_columns(g) if replays else []),
        "-" if g.f_ae is None else f"{g.f_ae:.3f}",
        steps_text(g),
        *_means(g, [
            pct(g.lines_kept), pct(g.reduction),
            tokens(g.action_tokens_per_step), tokens(g.retriever_tokens_per_step),
            tokens(g.action_tokens_per_episode), tokens(g.retriever_tokens_per_episode),
            f"${g.cost_per_episode:.4f}", f"{g.wall_s:.1f}"]),
        f"{g.repeats_escaped} / {g.repeats_kept}", errors_text(g),
    ]


def _means(g: GroupMetrics, cells: list[str]) -> list[str]:
    """The agent's means, or none for a group without agent outcomes (only replays,
    infrastructure endings or assisted episodes): a 0 would read as a cost, a time or a
    reduction the agent had."""
    return cells if g.agent_episodes else ["-"] * len(cells)


AGENT_N = "agent outcomes (n)"
"""The column every mean of a row is over (``GroupMetrics.agent_episodes``)."""

GROUP_HEADER = [
    "episodes", AGENT_N, "success % ± SE", "infra endings", "assisted", "F-AE", "steps",
    "lines kept %", "tokens cut %", "action tok/step", "retriever tok/step", "action tok/episode",
    "retriever tok/episode", "cost/episode", "wall s/episode", "loops escaped / kept",
    "errors",
]
TASK_HEADER = ["task", "filter", "agent", "episodes", AGENT_N, "success % ± SE",
               "infra endings", "assisted", "steps", "tokens cut %", "tokens/episode",
               "errors"]
OTHER_HEADER = "budget / stopped"

DENOMINATOR_NOTE = (
    "One denominator per row: steps, F-AE, lines kept, tokens cut, tokens, cost and wall "
    "time are means over the row's agent outcomes (n); the success rate is over those the task "
    "could judge (its n beside it). Infrastructure endings, assisted episodes, replays "
    "and budget or stopped endings are counted in their own columns and in no mean.")


def _with_extra(header: list[str], replays: bool, others: bool) -> list[str]:
    at = header.index("assisted") + 1
    return [*header[:at], *([OTHER_HEADER] if others else []),
            *(REPLAY_HEADER if replays else []), *header[at:]]


def group_header(replays: bool = False, others: bool = False) -> list[str]:
    return _with_extra(GROUP_HEADER, replays, others)


def task_header(replays: bool = False, others: bool = False) -> list[str]:
    return _with_extra(TASK_HEADER, replays, others)


def task_columns(g: GroupMetrics, replays: bool = False, others: bool = False) -> list[str]:
    return [
        g.label["task"], g.label["filter"], g.label["agent"], str(g.episodes),
        str(g.agent_episodes), success_text(g), infra_text(g), assisted_text(g),
        *([other_text(g)] if others else []),
        *(replay_columns(g) if replays else []), steps_text(g),
        *_means(g, [pct(g.reduction),
                    tokens(g.action_tokens_per_episode + g.retriever_tokens_per_episode)]),
        errors_text(g),
    ]


REPLAYS_HEADER = ["agent", "filter", "replays", "model calls made", "calls saved",
                  "tokens saved", "saved measured against", "diverged"]


def saved_text(saved: float, baseline: float) -> str:
    """``11 of 12 (91.7 %)``: what the successful replays saved of what the agent spent."""
    if not baseline:
        return "-"
    return f"{tokens(saved)} of {tokens(baseline)} ({100 * saved / baseline:.1f} %)"


def measured_text(m: ReplayMetrics) -> str:
    parts = [f"recorded run {m.from_recorded}", f"task mean {m.from_task_mean}"]
    if m.unmeasured:
        parts.append(f"none {m.unmeasured}")
    return ", ".join(parts)


def diverged_text(m: ReplayMetrics) -> str:
    """``2 (none 1, heal_failed 1; the model took over 1)``."""
    if not m.diverged:
        return "0"
    text = ", ".join(f"{reason} {count}" for reason, count in m.divergences.items())
    if m.fell_back:
        text += f"; the model took over {m.fell_back}"
    return f"{m.diverged} ({text})"


def replays_rows(report: Report) -> list[list[str]]:
    """One row per agent and filter with replays: what they spent, saved and where
    they diverged."""
    return [
        [g.label["agent"], g.label["filter"], str(m.episodes),
         f"{m.llm_calls} ({tokens(m.tokens)} tokens)",
         saved_text(m.calls_saved, m.baseline_llm_calls),
         saved_text(m.tokens_saved, m.baseline_tokens),
         measured_text(m), diverged_text(m)]
        for g in report.overall if (m := g.replay) is not None
    ]


def replay_line(g: GroupMetrics) -> str | None:
    """The bench's closing line on its replays (None when it had none)."""
    m = g.replay
    if m is None:
        return None
    return (f"replays, not counted in the success rate: {m.replayed} replayed "
            f"({m.replayed_successes} succeeded), {m.healed} healed "
            f"({m.healed_successes} succeeded), diverged {diverged_text(m)}; model calls "
            f"saved {saved_text(m.calls_saved, m.baseline_llm_calls)}, tokens saved "
            f"{saved_text(m.tokens_saved, m.baseline_tokens)}")


def replays_notes(report: Report) -> list[str]:
    """What the replay section's table means (shown only when there are replays)."""
    replayed = sum(g.replay.replayed for g in report.overall if g.replay is not None)
    healed = sum(g.replay.healed for g in report.overall if g.replay is not None)
    episodes = "1 episode" if replayed + healed == 1 else f"{replayed + healed} episodes"
    return [
        f"{episodes} followed a recorded program (`linewise replay`, "
        f"`--replay-cache`): {replayed} replayed it with no model call, {healed} "
        "healed by the model where the page did not fit it. Neither is the agent's "
        "result: they have their own columns (replayed, healed: episodes, successes, "
        "success %) and count in none of the agent's numbers (success rate, F-AE, "
        "steps, reduction, tokens, cost and wall time per episode).",
        "Saved: over the replays that succeeded, the model calls and tokens of the run "
        "each stands for, less its own: the agent's episode its program was recorded "
        "from, found through its trace folder ('recorded run'), or where that episode is "
        "unknown the mean of the task's agent episodes in this bench ('task mean'); a "
        "successful replay with neither is left out ('none').",
        "Diverged: replays that could not be carried to their end, by reason (none: "
        "the element was found nowhere; several: among several equal ones; "
        "changed_role; effect: the step ran without the recorded effect; action_error; "
        "program_ended: the program ran out before the task ended; heal_failed: the "
        "model's healing did not bring it back); 'the model took over': the replay "
        "cache handed those to the model as an ordinary agent.",
    ]


def preamble(report: Report) -> list[str]:
    """The notes under the bench's state (``state_lines``): what the numbers mean."""
    p = report.prices
    rounds = (f"{report.max_rounds:g}" if report.max_rounds
              else "each group's largest step budget (max_steps)")
    return [
        f"{report.episodes} episodes, each once (its last attempt). Generated "
        f"{report.generated_at}.",
        "Success rate with its standard error (±SE) as in LineRetriever's Table 1, over "
        "the episodes that ended with an agent outcome; episodes that ended on an "
        "infrastructure fault (model endpoint, browser, runtime) are counted beside it "
        "under 'infra endings', never in it (`linewise bench --resume` runs them again); "
        "so are episodes a person assisted at the step-through prompt (overrode, skipped "
        "or did a step by hand: 'assisted'), whose result is not the agent's alone, and "
        "episodes whose actions a hook's code replaced ('+ N by code' there); "
        "errors: episodes that ended on an error by kind, then steps whose action failed "
        "or whose answer held no action; "
        "lines kept is the share of the tree's lines a step's view kept, and tokens cut "
        "is 1 − shown/full observation tokens with the full tree rendered as the view "
        "renders its lines (a view that keeps every line cuts nothing), each per step, "
        "averaged per episode then over episodes; F-AE is WebClipper's "
        f"accuracy–efficiency score with Max_Rounds = {rounds}.",
        DENOMINATOR_NOTE,
        f"Cost at ${p.action_input:g}/${p.action_output:g} per 1M action input/output "
        f"tokens and ${p.retriever_input:g}/${p.retriever_output:g} per 1M retriever "
        "input/output tokens.",
        "Loops: answers that repeated an action which had changed nothing on the page; "
        "escaped when a re-ask chose another action, kept when every re-ask repeated it.",
        f"Navigation policy: {report.blocked_navigations} page load(s) blocked "
        "(steps.jsonl `blocked` says which, why and who started them), "
        f"{report.refused_connections} other request(s) refused (`refused_connections`: "
        "host, reason and count).",
    ]


def opening(report: Report) -> list[StateLine]:
    """The bench's state, first in every rendering of the report."""
    return state_lines(report.state, report.episodes)


NO_RESULTS = "No episode has a results line yet: there is nothing to tabulate."
