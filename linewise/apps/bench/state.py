"""Where a bench stands: how much of its plan its report covers, why it stopped, and
how to carry on.

A report of 2 episodes reads like a finished bench of 2 unless it says that 10 more
were planned; this is what every rendering of the report opens with. It is read from
``bench.json`` (``manifest.py``: the plan, every run's end, the resume command),
``results.jsonl`` and the folders set aside for earlier attempts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

from linewise.apps.bench.manifest import (
    BenchManifest,
    StopReason,
    read_manifest,
    resume_command,
)
from linewise.apps.bench.plan import INCOMPLETE_DIR, INFRA_DIR
from linewise.apps.bench.results import EpisodeResult

Stop = StopReason | Literal["killed", "unknown"]
"""``killed``: the last run recorded no end (killed outright, or still running);
``unknown``: a bench.json from before runs recorded their end."""

STOP_TEXT: dict[str, str] = {
    "finished": "it ran every episode it set out to run",
    "interrupted": "interrupted",
    "outage": "the model endpoint stayed down",
    "budget": "the run budget was spent",
    "refused": "the model endpoint refused the key or the model",
    "disk": "the disk refused the trace",
    "crashed": "an error of linewise's own",
    "killed": "the last run recorded no end: it was killed (SIGKILL, a power cut) or is "
              "still running",
    "unknown": "not recorded (a bench from before linewise recorded why runs stopped)",
}


class BenchState(BaseModel):
    """The bench's plan against its results, as every report states it."""

    planned: int | None = Field(description="Episodes of the plan (None: no bench.json, "
                                "the plan is unknown).")
    ran: int = Field(description="Episodes of the plan with a results line.")
    left: int = Field(description="Episodes of the plan without one: never started, or "
                      "cut short (``--resume`` runs them).")
    rerun: int = Field(default=0, description="Of those that ran, infrastructure endings "
                       "(``--resume`` runs them again).")
    outside_plan: int = Field(default=0, description="Results lines of episodes outside "
                              "the plan (a folder rerun with another task file by a "
                              "linewise that did not refuse it).")
    earlier_attempts: int = Field(default=0, description="Attempts set aside before an "
                                  "episode ran again (``_infra/``, ``_incomplete/``): each "
                                  "episode is counted once, as its last attempt ended.")
    stop: Stop | None = Field(default=None, description="Why the last run stopped.")
    stop_detail: str = ""
    stopped_at: str = ""
    resume: str | None = Field(default=None, description="The command that continues the "
                               "bench (None when nothing is left to run).")
    resume_cwd: str = ""

    @property
    def complete(self) -> bool:
        return self.planned is not None and self.left == 0 and self.rerun == 0


def bench_state(out_dir: Path, results: list[EpisodeResult]) -> BenchState:
    """The state of the bench in ``out_dir`` whose results lines are ``results``."""
    manifest = read_manifest(out_dir)
    attempts = sum(1 for into in (INFRA_DIR, INCOMPLETE_DIR)
                   for filter_dir in _dirs(out_dir / into) for _ in _dirs(filter_dir))
    if manifest is None:
        return BenchState(planned=None, ran=len(results), left=0,
                          rerun=sum(not r.is_final for r in results),
                          earlier_attempts=attempts)
    plan = manifest.plan
    mine = results if plan is None else [r for r in results if r.key in plan]
    planned = len(plan) if plan is not None else max(manifest.episodes, len(results))
    state = BenchState(
        planned=planned, ran=len(mine), left=max(0, planned - len(mine)),
        rerun=sum(not r.is_final for r in mine), outside_plan=len(results) - len(mine),
        earlier_attempts=attempts,
    )
    _add_stop(state, manifest)
    resume = manifest.resume
    if resume is None and manifest.invocations and manifest.invocations[0].argv:
        # A bench.json from before the command was recorded: its first invocation (the
        # whole plan) with --resume, from a folder it does not say.
        resume = resume_command(manifest.invocations[0].argv, out_dir, cwd="")
    if (state.left or state.rerun) and resume is not None:
        state.resume, state.resume_cwd = resume.text(), resume.cwd
    return state


def _add_stop(state: BenchState, manifest: BenchManifest) -> None:
    if not manifest.invocations:
        return
    last = manifest.invocations[-1]
    if last.ended is not None:
        state.stop, state.stop_detail = last.ended.reason, last.ended.detail
        state.stopped_at = last.ended.at
    else:
        state.stop = "killed" if last.recorded_end else "unknown"


def _dirs(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []


class StateLine(NamedTuple):
    """A line of the report's opening: words, then a command to copy (if any) and the
    words after it; each rendering marks the command its own way."""

    text: str
    command: str = ""
    after: str = ""


def state_lines(state: BenchState, episodes: int) -> list[StateLine]:
    """The report's opening: what it covers of the plan, why the bench stopped, and
    the command that carries on (``episodes``: results lines)."""
    if state.planned is None:
        return [StateLine(f"{episodes} episodes (no bench.json: the plan, and so what is "
                          "left, is unknown).")]
    if state.left:
        head = (f"Incomplete: {state.ran} of {state.planned} planned episodes ran, "
                f"{state.left} left (never started or cut short).")
    elif state.rerun:
        head = f"All {state.planned} planned episodes ran."
    else:
        head = f"Complete: all {state.planned} planned episodes ran."
    if state.rerun:
        head += (f" {state.rerun} ended on an infrastructure fault: not judged, and run "
                 "again by --resume.")
    lines = [StateLine(head)]
    if state.stop is not None and not state.complete:
        why = STOP_TEXT[state.stop]
        if state.stop_detail:
            why += f" ({state.stop_detail})"
        when = f" at {state.stopped_at}" if state.stopped_at else ""
        if state.stop == "unknown":
            lines.append(StateLine(f"Why the last run ended: {why}."))
        elif state.stop == "finished":
            lines.append(StateLine(f"Last run ended{when}: {why}."))
        else:
            lines.append(StateLine(f"Stopped{when}: {why}."))
    if state.resume is not None:
        where = f" (from {state.resume_cwd})" if state.resume_cwd else ""
        lines.append(StateLine("Resume with:", state.resume, where))
    if state.outside_plan:
        lines.append(StateLine(
            f"{state.outside_plan} results lines are of episodes outside the plan (the "
            "folder was rerun with another task file): they are in the tables below, not "
            "in the counts above."))
    if state.earlier_attempts:
        were = "attempt was" if state.earlier_attempts == 1 else "attempts were"
        lines.append(StateLine(
            f"{state.earlier_attempts} earlier {were} set aside (_infra/, _incomplete/) "
            "for their episodes to run again: each episode counts once, as its last "
            "attempt ended."))
    return lines
