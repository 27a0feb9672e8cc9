"""Scoring observation filters offline, without an agent: ``linewise filter-eval CASES``.

A case is a saved observation (the AXTree lines), a goal, a history and the gold
elements (bids) or lines the next action needs. Each filter is applied to each case;
the report gives, per filter, the mean token reduction, the recall of gold items in
the filtered view, the retriever's tokens and the time, overall and on pages over 300
lines. ``linewise snapshot URL`` writes a case skeleton from a live page.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from linewise.agent.filters.base import FilterInput, FilterResult, ObservationFilter
from linewise.agent.filters.view.render import render_with_markers
from linewise.axtree import bids_in
from linewise.errors import ConfigError
from linewise.jsonl import read_jsonl
from linewise.tokens import count_tokens

LARGE_PAGE_LINES = 300

GoalKind = Literal["named", "paraphrased", "multistep"]
GOAL_KINDS: tuple[GoalKind, ...] = ("named", "paraphrased", "multistep")


class FilterCase(BaseModel):
    """One saved observation with what the next action needs from it."""

    id: str
    source: str = Field(default="", description="Where the observation came from.")
    kind: GoalKind = Field(
        default="named", description="named: the goal names the element; paraphrased: "
        "it shares no content word with it; multistep: a goal with a history, the gold "
        "being what the next action needs.",
    )
    goal: str
    history: list[str] = Field(default_factory=list)
    focused_bid: str = ""
    lines: list[str] = Field(description="The AXTree lines, unnumbered.")
    gold_bids: list[str] = Field(default_factory=list)
    gold_lines: list[int] = Field(default_factory=list, description="1-based line numbers.")

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def gold_count(self) -> int:
        return len(self.gold_bids) + len(self.gold_lines)


class CaseScore(BaseModel):
    case_id: str
    filter: str
    kind: GoalKind = "named"
    lines: int
    tokens_full: int
    tokens_shown: int
    reduction: float
    gold_total: int
    gold_found: int
    missing: list[str]
    retriever_tokens: int
    latency_ms: float
    fallback_reason: str | None = None


class FilterSummary(BaseModel):
    filter: str
    cases: int
    mean_reduction: float
    gold_recall: float
    mean_retriever_tokens: float
    mean_latency_ms: float
    large_cases: int
    large_mean_reduction: float | None
    large_gold_recall: float | None
    fallbacks: int


def load_cases(*paths: Path) -> list[FilterCase]:
    """Cases from .json files (one case or a list), .jsonl files, or folders of them;
    a case id may appear once in all of them."""
    cases: list[FilterCase] = []
    for path in paths:
        cases += _cases_in(path)
    if not cases:
        raise ConfigError(f"{', '.join(map(str, paths))}: no filter cases found")
    ids = [c.id for c in cases]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ConfigError(f"duplicate case ids {', '.join(duplicates)}")
    return cases


def _cases_in(path: Path) -> list[FilterCase]:
    if not path.exists():
        raise ConfigError(f"{path}: no such file or folder")
    files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl")) if (
        path.is_dir()
    ) else [path]
    cases: list[FilterCase] = []
    for file in files:
        try:
            if file.suffix == ".jsonl":
                items = []
                for line in read_jsonl(file.read_bytes()):
                    if line.error is not None:
                        raise ConfigError(f"{file} line {line.number}: {line.error}")
                    items.append(line.value)
            else:
                data = json.loads(file.read_text())
                items = data if isinstance(data, list) else [data]
            cases.extend(FilterCase.model_validate(item) for item in items)
        except (ValueError, ValidationError, RecursionError) as exc:
            raise ConfigError(f"{file}: not a valid filter case: {exc}") from exc
    return cases


def score_case(case: FilterCase, result: FilterResult) -> CaseScore:
    shown_lines = set(result.text.split("\n"))
    shown_bids = set(bids_in(result.text))
    missing = [f"[{b}]" for b in case.gold_bids if b not in shown_bids]
    missing += [
        f"line {n}" for n in case.gold_lines
        if not (1 <= n <= len(case.lines)) or case.lines[n - 1] not in shown_lines
    ]
    return CaseScore(
        case_id=case.id,
        filter=result.name,
        kind=case.kind,
        lines=len(case.lines),
        tokens_full=result.tokens_full,
        tokens_shown=result.tokens_shown,
        reduction=result.reduction,
        gold_total=case.gold_count(),
        gold_found=case.gold_count() - len(missing),
        missing=missing,
        retriever_tokens=sum(c.prompt_tokens + c.completion_tokens for c in result.calls),
        latency_ms=result.latency_ms,
        fallback_reason=result.fallback_reason,
    )


class KindSummary(BaseModel):
    """One filter on the cases of one goal kind (pages over LARGE_PAGE_LINES lines)."""

    filter: str
    kind: GoalKind
    cases: int
    mean_reduction: float
    gold_recall: float
    mean_latency_ms: float
    max_latency_ms: float


def summarize_kinds(name: str, scores: Sequence[CaseScore]) -> list[KindSummary]:
    """Per goal kind, on large pages only (where filtering matters): kinds with no case
    are left out."""
    out: list[KindSummary] = []
    for kind in GOAL_KINDS:
        items = [s for s in scores if s.kind == kind and s.lines > LARGE_PAGE_LINES]
        if not items:
            continue
        total = sum(s.gold_total for s in items)
        out.append(KindSummary(
            filter=name, kind=kind, cases=len(items),
            mean_reduction=statistics.fmean(s.reduction for s in items),
            gold_recall=sum(s.gold_found for s in items) / total if total else 0.0,
            mean_latency_ms=statistics.fmean(s.latency_ms for s in items),
            max_latency_ms=max(s.latency_ms for s in items),
        ))
    return out


def _input(case: FilterCase) -> FilterInput:
    return FilterInput(
        goal=case.goal, lines=case.lines, history=case.history, focused_bid=case.focused_bid,
    )


async def evaluate(
    cases: Sequence[FilterCase], make_filter: Callable[[], ObservationFilter]
) -> list[CaseScore]:
    """Apply a fresh filter to every case (no state carried between cases) and score it."""
    scores = []
    for case in cases:
        result = await make_filter().apply(_input(case))
        scores.append(score_case(case, result))
    return scores


async def evaluate_filters(
    cases: Sequence[FilterCase],
    factories: Mapping[str, Callable[[], ObservationFilter]],
    on_score: Callable[[CaseScore], None] | None = None,
) -> dict[str, list[CaseScore]]:
    """Every filter on every case, case by case, reporting each score as it comes.

    ``lines`` and ``lines+structure`` make the same selection and differ only in how the
    view is drawn, so when both are asked for the retriever is asked once per case and
    ``lines`` is drawn from the structure filter's kept lines.
    """
    order = sorted(factories, key=lambda name: name != "lines+structure")
    scores: dict[str, list[CaseScore]] = {name: [] for name in factories}
    for case in cases:
        structure: FilterResult | None = None
        for name in order:
            if name == "lines" and structure is not None:
                result = lines_view_of(case, structure)
            else:
                result = await factories[name]().apply(_input(case))
            if name == "lines+structure":
                structure = result
            score = score_case(case, result)
            scores[name].append(score)
            if on_score is not None:
                on_score(score)
    return scores


def lines_view_of(case: FilterCase, structure: FilterResult) -> FilterResult:
    """The ``lines`` view (kept lines verbatim, counted markers) of a structure result."""
    text = (
        case.text if structure.fallback_reason is not None
        else render_with_markers(case.lines, structure.kept_lines)
    )
    return structure.model_copy(update={
        "name": "lines", "text": text, "tokens_shown": count_tokens(text),
        "notes": {**structure.notes, "selection_shared_with": "lines+structure"},
    })


def summarize(name: str, scores: Sequence[CaseScore]) -> FilterSummary:
    large = [s for s in scores if s.lines > LARGE_PAGE_LINES]

    def recall(items: Sequence[CaseScore]) -> float | None:
        total = sum(s.gold_total for s in items)
        return sum(s.gold_found for s in items) / total if total else None

    return FilterSummary(
        filter=name,
        cases=len(scores),
        mean_reduction=statistics.fmean(s.reduction for s in scores) if scores else 0.0,
        gold_recall=recall(scores) or 0.0,
        mean_retriever_tokens=statistics.fmean(s.retriever_tokens for s in scores) if scores else 0,
        mean_latency_ms=statistics.fmean(s.latency_ms for s in scores) if scores else 0.0,
        large_cases=len(large),
        large_mean_reduction=statistics.fmean(s.reduction for s in large) if large else None,
        large_gold_recall=recall(large),
        fallbacks=sum(1 for s in scores if s.fallback_reason),
    )


def format_table(summaries: Sequence[FilterSummary]) -> str:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    header = ("filter", "cases", "reduction", "gold recall", f">{LARGE_PAGE_LINES} lines: "
              "reduction", "recall", "retriever tok", "time/case", "fallbacks")
    rows = [header] + [
        (s.filter, str(s.cases), pct(s.mean_reduction), pct(s.gold_recall),
         pct(s.large_mean_reduction), pct(s.large_gold_recall),
         f"{s.mean_retriever_tokens:.0f}", f"{s.mean_latency_ms / 1000:.1f}s", str(s.fallbacks))
        for s in summaries
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def format_kind_table(summaries: Sequence[KindSummary]) -> str:
    """Recall, reduction and time per case by goal kind, on pages over 300 lines."""
    header = ("filter", "goal kind", "cases", "reduction", "gold recall", "time/case",
              "max time")
    rows = [header] + [
        (s.filter, s.kind, str(s.cases), f"{100 * s.mean_reduction:.1f}%",
         f"{100 * s.gold_recall:.1f}%", f"{s.mean_latency_ms / 1000:.2f}s",
         f"{s.max_latency_ms / 1000:.2f}s")
        for s in summaries
    ]
    return _columns(rows)


def format_case_table(scores: Sequence[CaseScore]) -> str:
    """One row per case and filter: lines, reduction, gold found, latency."""
    header = ("case", "kind", "filter", "lines", "reduction", "gold", "time", "missing")
    rows = [header] + [
        (s.case_id, s.kind, s.filter, str(s.lines), f"{100 * s.reduction:.1f}%",
         f"{s.gold_found}/{s.gold_total}", f"{s.latency_ms / 1000:.2f}s",
         " ".join(s.missing) or "-")
        for s in scores
    ]
    return _columns(rows)


def _columns(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def snapshot_case(case_id: str, url: str, goal: str, lines: list[str]) -> FilterCase:
    """A case skeleton: fill in ``gold_bids`` (or ``gold_lines``) by hand."""
    return FilterCase(id=case_id, source=url, goal=goal, lines=lines)
