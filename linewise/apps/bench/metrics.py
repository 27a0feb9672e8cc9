"""The paper's metrics over results lines: success ± SE, reduction, tokens, cost, F-AE.

- Success rate with the standard error of a proportion, ``sqrt(p (1 - p) / n)``, as in
  LineRetriever's Table 1, over the episodes that ended with an agent outcome
  (``records.outcome_of``): an episode that ended on an infrastructure fault says
  nothing about the agent, so it is counted beside the rate (``infrastructure``), never
  in it. Episodes whose success is unknown (a web task without a success check) are
  left out of the rate too; agent failures (wrong answer, step limit, answers that never
  parsed) count as failures. Steps and F-AE are over agent outcomes as well. An
  episode a person assisted at the step-through prompt (outcome ``assisted``) is the
  person's work as much as the agent's: counted beside the rate (``assisted``), never
  in it.
- Observation reduction ``1 - |o_r| / |o_i|`` per step, averaged over an episode's
  steps, then over episodes.
- F-AE (WebClipper, Appendix A): the harmonic mean of accuracy and efficiency
  ``E = 1 - Rounds / Max_Rounds``, with Rounds the mean number of steps. Max_Rounds is
  "the maximum number of tool calls allowed in the experiment": by default the largest
  step budget (``max_steps``) among the group's episodes, or a fixed value if given.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable

from pydantic import BaseModel, Field

from linewise.agent.filters.cost_gate import Prices
from linewise.apps.bench.results import ERROR_KINDS, EpisodeResult


def episode_cost(prices: Prices, r: EpisodeResult) -> float:
    """Dollars for one episode's action-model and retriever tokens."""
    return (
        r.action_prompt_tokens * prices.action_input
        + r.action_completion_tokens * prices.action_output
        + r.retriever_prompt_tokens * prices.retriever_input
        + r.retriever_completion_tokens * prices.retriever_output
    ) / 1e6


def success_rate(outcomes: Iterable[bool]) -> tuple[float | None, float | None]:
    """(rate, standard error) of a list of successes; (None, None) when empty. One
    episode has no standard error (the formula's 0 would read as certainty): None."""
    values = list(outcomes)
    if not values:
        return None, None
    p = sum(values) / len(values)
    return p, math.sqrt(p * (1 - p) / len(values)) if len(values) > 1 else None


def f_ae(accuracy: float, rounds: float, max_rounds: float) -> float:
    """WebClipper's F-AE score: 2·Acc·E / (Acc + E) with E = 1 - Rounds / Max_Rounds."""
    if max_rounds <= 0:
        raise ValueError("Max_Rounds must be positive")
    efficiency = min(1.0, max(0.0, 1 - rounds / max_rounds))
    if accuracy + efficiency == 0:
        return 0.0
    return 2 * accuracy * efficiency / (accuracy + efficiency)


class GroupMetrics(BaseModel):
    """One row of the report: a set of episodes (an agent × filter × benchmark, or a task)."""

    label: dict[str, str]
    episodes: int
    judged: int = Field(description="Agent outcomes whose success is known.")
    agent_episodes: int = Field(default=0, description="Agent outcomes (what steps and "
                                "F-AE are over).")
    infrastructure: int = Field(
        default=0, description="Episodes that ended on an infrastructure fault (not judged)."
    )
    infra_kinds: dict[str, int] = Field(default_factory=dict)
    assisted: int = Field(
        default=0, description="Episodes a person assisted at the step-through prompt "
        "(not judged: a person's work is not the agent's)."
    )
    successes: int
    success_rate: float | None
    success_se: float | None
    reduction: float | None
    steps: float
    action_tokens_per_step: float
    retriever_tokens_per_step: float
    action_tokens_per_episode: float
    retriever_tokens_per_episode: float
    cost_per_episode: float
    cost_total: float
    wall_s: float
    errors: dict[str, int]
    step_errors: dict[str, int] = Field(
        default_factory=dict,
        description="Steps whose action failed ('action') or whose answer held no usable "
        "action ('parse'): the episodes go on after them, so they are no episode error.",
    )
    repeats_escaped: int = Field(default=0, description="Loops left after a re-ask.")
    repeats_kept: int = Field(default=0, description="Loops every re-ask repeated.")
    max_rounds: float
    f_ae: float | None


def summarize(results: list[EpisodeResult], label: dict[str, str], prices: Prices,
              max_rounds: float | None = None) -> GroupMetrics:
    """The metrics of one group of episodes."""
    n = len(results)
    agent = [r for r in results if r.outcome == "agent"]
    infra = Counter(r.infra_kind or "unknown" for r in results if r.outcome == "infrastructure")
    judged = [bool(r.success) for r in agent if r.success is not None]
    rate, se = success_rate(judged)
    reductions = [r.reduction for r in results if r.reduction is not None]
    total_steps = sum(r.n_steps for r in results)
    action = sum(r.action_tokens for r in results)
    retriever = sum(r.retriever_tokens for r in results)
    costs = [episode_cost(prices, r) for r in results]
    steps = statistics.fmean(r.n_steps for r in agent) if agent else 0.0
    rounds_cap = max_rounds or max((r.max_steps for r in results), default=0) or 1
    errors = Counter(r.error_kind for r in results if r.error_kind is not None)
    return GroupMetrics(
        label=label,
        episodes=n,
        judged=len(judged),
        agent_episodes=len(agent),
        infrastructure=sum(infra.values()),
        infra_kinds=dict(sorted(infra.items())),
        assisted=sum(r.outcome == "assisted" for r in results),
        successes=sum(judged),
        success_rate=rate,
        success_se=se,
        reduction=statistics.fmean(reductions) if reductions else None,
        steps=steps,
        action_tokens_per_step=action / total_steps if total_steps else 0.0,
        retriever_tokens_per_step=retriever / total_steps if total_steps else 0.0,
        action_tokens_per_episode=action / n if n else 0.0,
        retriever_tokens_per_episode=retriever / n if n else 0.0,
        cost_per_episode=statistics.fmean(costs) if costs else 0.0,
        cost_total=sum(costs),
        wall_s=statistics.fmean(r.wall_s for r in results) if results else 0.0,
        errors={kind: errors[kind] for kind in ERROR_KINDS if errors[kind]},
        step_errors={kind: count for kind, count in (
            ("action", sum(r.action_errors for r in results)),
            ("parse", sum(r.parse_errors for r in results)),
        ) if count},
        repeats_escaped=sum(r.repeats_escaped for r in results),
        repeats_kept=sum(r.repeats_kept for r in results),
        max_rounds=rounds_cap,
        f_ae=None if rate is None else f_ae(rate, steps, rounds_cap),
    )


def grouped(
    results: list[EpisodeResult],
    key: Callable[[EpisodeResult], tuple[str, ...]],
    names: tuple[str, ...],
    prices: Prices,
    max_rounds: float | None = None,
) -> list[GroupMetrics]:
    """``summarize`` for each value of ``key``, in sorted order."""
    groups: dict[tuple[str, ...], list[EpisodeResult]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    return [
        summarize(members, dict(zip(names, k, strict=True)), prices, max_rounds)
        for k, members in sorted(groups.items())
    ]
