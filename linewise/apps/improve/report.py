"""The improve loop's report: success per round (``improve.json``) and its table."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from linewise.apps.bench.metrics import success_rate
from linewise.apps.bench.results import EpisodeResult

REPORT_FILE = "improve.json"
TABLE_FILE = "improve.md"


class Success(BaseModel):
    """Success over a bench's agent outcomes, with the standard error."""

    successes: int = 0
    judged: int = 0
    rate: float | None = None
    se: float | None = None
    infrastructure: int = Field(default=0, description="Endings not judged (not the agent's).")
    calls_per_episode: float | None = Field(
        default=None, description="Model calls per judged episode (a skill's steps make none).")
    replayed: int = Field(
        default=0, description="Tasks solved in an earlier round and replayed from the replay "
        "cache, successfully: not judged, since the agent did not solve them again.")

    @classmethod
    def of(cls, results: list[EpisodeResult]) -> Success:
        agent = [r for r in results if r.outcome == "agent" and r.success is not None]
        judged = [bool(r.success) for r in agent]
        rate, se = success_rate(judged)
        calls = sum(r.llm_calls for r in agent) / len(agent) if agent else None
        return cls(successes=sum(judged), judged=len(judged), rate=rate, se=se,
                   infrastructure=sum(r.outcome == "infrastructure" for r in results),
                   calls_per_episode=calls,
                   replayed=sum(r.outcome in ("replayed", "healed") and bool(r.success)
                                for r in results))


class RoundResult(BaseModel):
    round: int
    memory_entries: int = 0
    memory_from_pruner: int = 0
    train: Success | None = None
    test: Success
    memory: str | None = Field(default=None, description="The memory file the test used.")
    skills: int | None = Field(default=None, description="Skills induced (--skills-arm).")
    test_skills: Success | None = Field(
        default=None, description="The test seeds with the memory and the skills.")
    retriever: str | None = Field(
        default=None, description="The retriever weights the round's test benches used "
        "(--retrain-retriever); None for the base embedder.")
    retriever_examples: int | None = Field(
        default=None, description="The examples the round's retriever was trained on.")
    test_targets_shown: float | None = Field(
        default=None, description="Of the elements the test bench's actions named, the "
        "share its views showed (--retrain-retriever).")


class ImproveReport(BaseModel):
    tasks: list[str]
    train_seeds: str
    test_seeds: str
    filter: str
    prune: bool
    rounds: list[RoundResult] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    bench_notes: list[str] = Field(
        default_factory=list, description="What `linewise report` found in the round "
        "benches as it counted them again (a bench not finished, a round with no test "
        "bench): rewritten each time, where ``notes`` are kept.")


def read_report(out_dir: Path) -> ImproveReport:
    return ImproveReport.model_validate(json.loads((out_dir / REPORT_FILE).read_text("utf-8")))


def success_cell(success: Success | None) -> str:
    """``62.5 ± 17.1 (5/8)``; ``–`` for no bench, ``n/a`` for no judged episode; the
    tasks replayed from an earlier round's solution are named apart (``+2 replayed``)."""
    if success is None:
        return "–"
    if success.rate is None:
        return f"n/a (0 judged{f', +{success.replayed} replayed' if success.replayed else ''})"
    se = f" ± {success.se * 100:.1f}" if success.se is not None else ""
    infra = f", {success.infrastructure} infra" if success.infrastructure else ""
    replayed = f", +{success.replayed} replayed" if success.replayed else ""
    return (f"{success.rate * 100:.1f}{se} ({success.successes}/{success.judged}{infra}"
            f"{replayed})")


def _calls(success: Success | None) -> str:
    if success is None or success.calls_per_episode is None:
        return "–"
    return f"{success.calls_per_episode:.1f}"


def improve_table(report: ImproveReport) -> str:
    lines = [
        f"Tasks: {', '.join(report.tasks)}; training seeds {report.train_seeds}, test seeds "
        f"{report.test_seeds}; filter {report.filter}; pruning "
        f"{'on' if report.prune else 'off'}.",
        "",
        "| round | memory entries (from the pruner) | train success % ± SE | "
        "test success % ± SE |",
        "|---|---|---|---|",
    ]
    arm = any(row.skills is not None for row in report.rounds)
    if arm:
        lines[-2] += " skills | test with skills % ± SE | model calls / test episode (+ skills) |"
        lines[-1] += "---|---|---|"
    retrained = any(row.retriever_examples is not None for row in report.rounds)
    if retrained:
        lines[-2] += " retriever examples | test: targets shown % |"
        lines[-1] += "---|---|"
    for row in report.rounds:
        name = "0 (no memory)" if row.round == 0 else str(row.round)
        entries = "–" if row.round == 0 else f"{row.memory_entries} ({row.memory_from_pruner})"
        line = f"| {name} | {entries} | {success_cell(row.train)} | {success_cell(row.test)} |"
        if arm:
            skills = "–" if row.skills is None else str(row.skills)
            line += (f" {skills} | {success_cell(row.test_skills)} | "
                     f"{_calls(row.test)} ({_calls(row.test_skills)}) |")
        if retrained:
            examples = "–" if row.retriever_examples is None else str(row.retriever_examples)
            shown = ("–" if row.test_targets_shown is None
                     else f"{row.test_targets_shown * 100:.1f}")
            line += f" {examples} | {shown} |"
        lines.append(line)
    if report.notes or report.bench_notes:
        lines += ["", *(f"Note: {note}" for note in [*report.notes, *report.bench_notes])]
    return "\n".join(lines) + "\n"
