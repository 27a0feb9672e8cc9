"""The paper's metrics over results lines: success ± SE, reduction, tokens, cost, F-AE.

- Success rate with the standard error of a proportion, ``sqrt(p (1 - p) / n)``, as in
  LineRetriever's Table 1, over the episodes that ended with an agent outcome
  (``records.outcome_of``): an episode that ended on an infrastructure fault says
  nothing about the agent, so it is counted beside the rate (``infrastructure``), never
  in it. Episodes whose success is unknown (a web task without a success check) are
  left out of the rate too; agent failures (wrong answer, step limit, answers that never
  parsed) count as failures. An episode a person assisted at the step-through prompt
  (outcome ``assisted``) is the person's work as much as the agent's: counted beside
  the rate (``assisted``), never in it; so is one whose actions a hook's code replaced
  (outcome ``hooked``), and so are the endings of a budget and of a stop.
- One denominator for every mean of a group: its agent outcomes (``agent_episodes``,
  the report's ``n``). Steps, F-AE, reduction, tokens per step and per episode, cost
  and wall time per episode are over them alone: an endpoint fault's 0 tokens, a
  deadline's 600 s or a person's steps would pull the agent's means towards what the
  agent did not do. The other endings are counted, each in its own column, and their
  spending is in ``cost_total``.
- Replays (``linewise replay``, ``--replay-cache``): an episode that followed a
  recorded program is ``replayed`` (no model call) or ``healed`` (the model chose some
  steps); neither is the agent's result, so each has its own episodes, successes and
  success rate beside the agent's (``ReplayMetrics``), and none of the agent's means
  (steps, reduction, tokens and cost per episode, wall time) counts them: a replayed
  step's view is only the elements it acts on. What a successful replay saved is its
  model calls and tokens against those of the agent episode its program was recorded
  from, or, where that episode is unknown, the mean of the task's agent episodes in
  the same results.
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
from typing import Any, get_args

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.apps.bench.results import ERROR_KINDS, EpisodeResult
from linewise.records import DivergenceReason

REPLAY_OUTCOMES: frozenset[str] = frozenset({"replayed", "healed"})


def episode_cost(prices: Prices, r: EpisodeResult) -> float:
    """Dollars for one episode's action-model and retriever tokens."""
    return prices.cost(r.action_prompt_tokens, r.action_completion_tokens,
                       r.retriever_prompt_tokens, r.retriever_completion_tokens)


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


class Baseline(BaseModel):
    """What the agent spent on a task: the mean model calls and tokens of its agent
    episodes (what a replay is measured against when its recorded run is unknown)."""

    episodes: int
    llm_calls: float
    tokens: float


def task_baselines(results: Iterable[EpisodeResult]) -> dict[str, Baseline]:
    """Each task's (``base_task``) agent episodes' mean model calls and tokens."""
    spent: dict[str, list[EpisodeResult]] = {}
    for r in results:
        if r.outcome == "agent":
            spent.setdefault(r.base_task, []).append(r)
    return {task: Baseline(episodes=len(rs),
                           llm_calls=statistics.fmean(r.llm_calls for r in rs),
                           tokens=statistics.fmean(r.action_tokens + r.retriever_tokens
                                                   for r in rs))
            for task, rs in spent.items()}


class ReplayMetrics(BaseModel):
    """The episodes of a group that followed a recorded program, counted apart."""

    replayed: int = Field(default=0, description="Replays with no model call.")
    replayed_successes: int = 0
    replayed_rate: float | None = None
    healed: int = Field(default=0, description="Replays some of whose steps the model "
                        "chose (or that it finished after healing failed).")
    healed_successes: int = 0
    healed_rate: float | None = None
    llm_calls: int = Field(default=0, description="Model calls every replay made.")
    tokens: int = Field(default=0, description="Model tokens every replay spent.")
    measured: int = Field(default=0, description="Successful replays with a baseline.")
    measured_llm_calls: int = Field(default=0, description="Their own model calls.")
    measured_tokens: int = 0
    baseline_llm_calls: float = Field(
        default=0.0, description="What the agent episodes they stand for made.")
    baseline_tokens: float = 0.0
    from_recorded: int = Field(default=0, description="Measured against the recorded "
                               "agent episode their program came from.")
    from_task_mean: int = Field(default=0, description="Measured against the mean of the "
                                "task's agent episodes (the recorded one unknown).")
    unmeasured: int = Field(default=0, description="Successful replays with neither.")
    diverged: int = Field(default=0, description="Replays that could not be carried to "
                          "the end: stopped (``diverged_at``) or handed to the model after "
                          "healing failed (``fell_back_at``).")
    divergences: dict[str, int] = Field(default_factory=dict,
                                        description="Those, by the reason of the divergence.")
    fell_back: int = Field(default=0, description="Of those, handed to the model.")

    @property
    def episodes(self) -> int:
        return self.replayed + self.healed

    @property
    def calls_saved(self) -> float:
        return self.baseline_llm_calls - self.measured_llm_calls

    @property
    def tokens_saved(self) -> float:
        return self.baseline_tokens - self.measured_tokens


def divergence_of(r: EpisodeResult) -> str | None:
    """Why a replay could not be carried to its end, or None when it was."""
    replay = r.replay
    if replay is None:
        return None
    if replay.diverged_at is not None:
        return replay.divergence or "unknown"
    if replay.fell_back_at is not None:  # the driver writes "<reason>: <detail>"
        reason = replay.detail.partition(":")[0].strip()
        return reason if reason in get_args(DivergenceReason) else "heal_failed"
    return None


def replay_metrics(results: list[EpisodeResult],
                   baselines: dict[str, Baseline]) -> ReplayMetrics | None:
    """The replays among ``results`` (None when there are none)."""
    replays = [r for r in results if r.outcome in REPLAY_OUTCOMES]
    if not replays:
        return None
    m = ReplayMetrics(llm_calls=sum(r.llm_calls for r in replays),
                      tokens=sum(r.action_tokens + r.retriever_tokens for r in replays))
    for kind in ("replayed", "healed"):
        judged = [bool(r.success) for r in replays
                  if r.outcome == kind and r.success is not None]
        setattr(m, kind, sum(r.outcome == kind for r in replays))
        setattr(m, f"{kind}_successes", sum(judged))
        setattr(m, f"{kind}_rate", success_rate(judged)[0])
    reasons: Counter[str] = Counter()
    for r in replays:
        reason = divergence_of(r)
        if reason is not None:
            reasons[reason] += 1
            m.fell_back += r.replay is not None and r.replay.fell_back_at is not None
        if not r.success:
            continue
        task = baselines.get(r.base_task)
        if r.recorded_llm_calls is not None:
            m.from_recorded += 1
            calls, spent = float(r.recorded_llm_calls), float(r.recorded_tokens or 0)
        elif task is not None:
            m.from_task_mean += 1
            calls, spent = task.llm_calls, task.tokens
        else:
            m.unmeasured += 1
            continue
        m.measured += 1
        m.measured_llm_calls += r.llm_calls
        m.measured_tokens += r.action_tokens + r.retriever_tokens
        m.baseline_llm_calls += calls
        m.baseline_tokens += spent
    m.diverged = sum(reasons.values())
    m.divergences = dict(sorted(reasons.items()))
    return m


class GroupMetrics(BaseModel):
    """One row of the report: a set of episodes (an agent × filter × benchmark, or a task)."""

    label: dict[str, str]
    episodes: int
    judged: int = Field(description="Agent outcomes whose success is known.")
    agent_episodes: int = Field(default=0, description="Agent outcomes: the n every "
                                "mean of the group is over (steps, F-AE, reduction, "
                                "tokens, cost and wall time per episode).")
    infrastructure: int = Field(
        default=0, description="Episodes that ended on an infrastructure fault (not judged)."
    )
    infra_kinds: dict[str, int] = Field(default_factory=dict)
    assisted: int = Field(
        default=0, description="Episodes a person assisted at the step-through prompt "
        "(not judged: a person's work is not the agent's)."
    )
    budget: int = Field(default=0, description="Episodes a budget ended (not judged).")
    stopped: int = Field(default=0, description="Episodes the user stopped (not judged).")
    hooked: int = Field(
        default=0, description="Episodes whose actions a hook's code replaced (not "
        "judged: code's choice is not the agent's)."
    )
    successes: int
    success_rate: float | None
    success_se: float | None
    reduction: float | None
    lines_kept: float | None = None
    steps: float
    action_tokens_per_step: float
    retriever_tokens_per_step: float
    action_tokens_per_episode: float
    retriever_tokens_per_episode: float
    cost_per_episode: float
    cost_total: float = Field(description="Dollars every episode of the group spent, "
                              "whatever its ending (the means count agent outcomes only).")
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
    replay: ReplayMetrics | None = Field(
        default=None, description="The group's replays, apart (None: it has none).")

    @model_serializer(mode="wrap")
    def _without_empty_replay(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A group with no replays is written as it was before replays existed."""
        data = handler(self)
        if isinstance(data, dict) and data.get("replay", 0) is None:
            del data["replay"]
        return data


def summarize(results: list[EpisodeResult], label: dict[str, str], prices: Prices,
              max_rounds: float | None = None,
              baselines: dict[str, Baseline] | None = None) -> GroupMetrics:
    """The metrics of one group of episodes; ``baselines``: each task's agent spending
    (``task_baselines``), what a replay with no recorded run is measured against
    (default: the group's own agent episodes)."""
    total = len(results)
    agent = [r for r in results if r.outcome == "agent"]
    infra = Counter(r.infra_kind or "unknown" for r in results if r.outcome == "infrastructure")
    judged = [bool(r.success) for r in agent if r.success is not None]
    rate, se = success_rate(judged)
    replays = replay_metrics(results, task_baselines(results) if baselines is None
                             else baselines)
    cost_total = sum(episode_cost(prices, r) for r in results)  # every ending's spending
    # The agent's means are over its outcomes alone (the module's docstring says why).
    results = [r for r in results if r.outcome not in REPLAY_OUTCOMES]
    n = len(agent)
    reductions = [r.reduction for r in agent if r.reduction is not None]
    kept = [r.lines_kept for r in agent if r.lines_kept is not None]
    total_steps = sum(r.n_steps for r in agent)
    action = sum(r.action_tokens for r in agent)
    retriever = sum(r.retriever_tokens for r in agent)
    costs = [episode_cost(prices, r) for r in agent]
    steps = statistics.fmean(r.n_steps for r in agent) if agent else 0.0
    rounds_cap = max_rounds or max((r.max_steps for r in results), default=0) or 1
    errors = Counter(r.error_kind for r in results if r.error_kind is not None)
    return GroupMetrics(
        label=label,
        episodes=total,
        judged=len(judged),
        agent_episodes=len(agent),
        infrastructure=sum(infra.values()),
        infra_kinds=dict(sorted(infra.items())),
        assisted=sum(r.outcome == "assisted" for r in results),
        budget=sum(r.outcome == "budget" for r in results),
        stopped=sum(r.outcome == "stopped" for r in results),
        hooked=sum(r.outcome == "hooked" for r in results),
        successes=sum(judged),
        success_rate=rate,
        success_se=se,
        reduction=statistics.fmean(reductions) if reductions else None,
        lines_kept=statistics.fmean(kept) if kept else None,
        steps=steps,
        action_tokens_per_step=action / total_steps if total_steps else 0.0,
        retriever_tokens_per_step=retriever / total_steps if total_steps else 0.0,
        action_tokens_per_episode=action / n if n else 0.0,
        retriever_tokens_per_episode=retriever / n if n else 0.0,
        cost_per_episode=statistics.fmean(costs) if costs else 0.0,
        cost_total=cost_total,
        wall_s=statistics.fmean(r.wall_s for r in agent) if agent else 0.0,
        errors={kind: errors[kind] for kind in ERROR_KINDS if errors[kind]},
        step_errors={kind: count for kind, count in (
            ("action", sum(r.action_errors for r in results)),
            ("parse", sum(r.parse_errors for r in results)),
        ) if count},
        repeats_escaped=sum(r.repeats_escaped for r in results),
        repeats_kept=sum(r.repeats_kept for r in results),
        max_rounds=rounds_cap,
        f_ae=None if rate is None else f_ae(rate, steps, rounds_cap),
        replay=replays,
    )


def grouped(
    results: list[EpisodeResult],
    key: Callable[[EpisodeResult], tuple[str, ...]],
    names: tuple[str, ...],
    prices: Prices,
    max_rounds: float | None = None,
) -> list[GroupMetrics]:
    """``summarize`` for each value of ``key``, in sorted order; a replay with no
    recorded run is measured against its task's agent episodes in all of ``results``."""
    groups: dict[tuple[str, ...], list[EpisodeResult]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    baselines = task_baselines(results)
    return [
        summarize(members, dict(zip(names, k, strict=True)), prices, max_rounds, baselines)
        for k, members in sorted(groups.items())
    ]
