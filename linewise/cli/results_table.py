"""The table ``linewise run`` prints at its end: every task, run or not, and a count of
what the agent achieved on its own.

Only agent outcomes are judged: an episode a person assisted at the step-through
prompt, one whose actions a hook's code replaced, one stopped there (``q``) or by
Ctrl+C, one that ended on an infrastructure fault or on a budget says nothing about
the agent, so each is named for what it is and left out of "N/M succeeded". Tasks that
never started are listed too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from linewise.records import EpisodeSummary

HEADER = ("task", "success", "reward", "steps", "tokens", "time", "note")


def success_cell(summary: EpisodeSummary) -> str:
    """The success column: the agent's own result, or why there is none to judge."""
    outcome = summary.outcome
    if outcome in ("assisted", "hooked"):
        # success None: the task has no check (an ad-hoc question), which is no failure
        done = ("no success check" if summary.success is None
                else "task done" if summary.success else "task not done")
        return f"{outcome} ({done})"
    if outcome in ("replayed", "healed"):
        return f"{outcome} ({'yes' if summary.success else 'no'})"
    if outcome == "stopped":
        return "stopped"
    if outcome == "infrastructure":
        return "infra fault"
    if outcome == "budget":
        return "budget"
    return "-" if summary.success is None else ("yes" if summary.success else "no")


def note_cell(summary: EpisodeSummary) -> str:
    if summary.outcome == "assisted":
        return (f"a person decided {summary.assisted_steps} of {summary.n_steps} steps: "
                "not counted as the agent's")
    if summary.outcome == "hooked":
        return (f"a hook replaced {summary.hook_steps} of {summary.n_steps} actions: "
                "not counted as the agent's")
    if summary.replay is not None:
        replay = summary.replay
        text = (f"{replay.replayed_steps} replayed, {replay.healed_steps} healed, "
                f"{summary.tokens.llm_calls} model calls")
        if replay.fell_back_at is not None:
            text += f"; the model took over at step {replay.fell_back_at + 1}"
        return f"{summary.error}; {text}" if summary.error else text
    return summary.error or summary.budget_stop or summary.termination


def replay_line(summaries: Sequence[EpisodeSummary]) -> str | None:
    """``2/2 replays succeeded (1 healed)…``: the episodes that followed a program,
    counted apart from the agent's (None when there were none)."""
    replays = [s for s in summaries if s.outcome in ("replayed", "healed")]
    if not replays:
        return None
    solved = sum(bool(s.success) for s in replays)
    healed = sum(s.outcome == "healed" for s in replays)
    calls = sum(s.tokens.llm_calls for s in replays)
    return (f"{solved}/{len(replays)} replays succeeded ({healed} healed by the model, "
            f"{calls} model calls in all).")


def count_line(summaries: Sequence[EpisodeSummary], not_run: int) -> str:
    """``1/2 succeeded``, over the judged agent outcomes only, then every episode the
    count leaves out, by why."""
    judged = [s for s in summaries if s.agent_success is not None]
    solved = sum(1 for s in judged if s.agent_success)
    unchecked = [s for s in summaries
                 if s.outcome in ("agent", "assisted", "hooked") and s.success is None]
    if not judged and len(unchecked) == len(summaries) and not not_run:
        # an ad-hoc question: nothing to judge, and "0/0 succeeded" would say a failure
        one = len(unchecked) == 1
        text = (f"No success check: {'the task has' if one else 'the tasks have'} none, so "
                "nothing was judged")
        assisted = [s for s in unchecked if s.outcome == "assisted"]
        if one and assisted:
            text += (f" (a person decided {assisted[0].assisted_steps} of its "
                     f"{assisted[0].n_steps} steps)")
        elif assisted:
            text += f" (a person decided steps of {len(assisted)} of them)"
        hooked = [s for s in unchecked if s.outcome == "hooked"]
        if one and hooked:
            text += (f" (a hook's code replaced the action of {hooked[0].hook_steps} of its "
                     f"{hooked[0].n_steps} steps)")
        elif hooked:
            text += f" (a hook's code replaced actions in {len(hooked)} of them)"
        return text + "; what the agent said is below."
    text = f"{solved}/{len(judged)} succeeded: the agent's own work, judged"
    aside = [
        (sum(s.outcome == "assisted" for s in summaries), "assisted by a person"),
        (sum(s.outcome == "hooked" for s in summaries), "with actions replaced by code"),
        (sum(s.outcome in ("replayed", "healed") for s in summaries), "replays"),
        (sum(s.outcome == "stopped" for s in summaries), "stopped"),
        (sum(s.outcome == "infrastructure" for s in summaries), "infrastructure faults"),
        (sum(s.outcome == "budget" for s in summaries), "ended by a budget"),
        (sum(s.outcome == "agent" and s.success is None for s in summaries),
         "with no success check"),
        (not_run, "not run"),
    ]
    left_out = [f"{count} {why}" for count, why in aside if count]
    if left_out:
        text += " (not counted: " + ", ".join(left_out) + ")"
    return text + "."


def print_summary_table(summaries: Sequence[EpisodeSummary], out_dir: Path,
                        not_run: Sequence[str] = ()) -> None:
    """The table of the episodes that ran, then the tasks in ``not_run`` (their ids)."""
    rows = [HEADER]
    for s in summaries:
        rows.append((s.task_id, success_cell(s), f"{s.reward:.2f}", str(s.n_steps),
                     str(s.tokens.total), f"{s.time.wall_s:.1f}s", note_cell(s)[:60]))
    rows += [(task_id, "not run", "", "", "", "", "never started") for task_id in not_run]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print(f"\n{count_line(summaries, len(not_run))} Traces in {out_dir}/")
    for summary in summaries:
        if summary.answer is not None:
            print(f"Answer ({summary.task_id}): {summary.answer}")
        elif summary.infeasible_reason is not None:
            print(f"Gave up ({summary.task_id}): {summary.infeasible_reason}")
    if (replays := replay_line(summaries)) is not None:
        print(replays)
    infra = [s for s in summaries if s.outcome == "infrastructure"]
    config = [s for s in infra if s.infra_kind == "config"]
    infra = [s for s in infra if s.infra_kind != "config"]
    if infra:
        kinds = ", ".join(sorted({s.infra_kind or "unknown" for s in infra}))
        print(f"{len(infra)} ended on an infrastructure fault ({kinds}), not the agent's doing.")
    if config:
        print(f"{len(config)} ended on a configuration error, not the agent's doing: "
              f"{config[0].error}")
