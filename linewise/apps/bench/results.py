"""``results.jsonl``: one line per finished episode, the bench's single source of truth.

Each line is written whole, flushed and fsynced before the next episode is counted as
done, so a kill at any moment leaves at most a torn last line. The reader ignores such
a line and the writer cuts it off before appending, so lines never run together; resume
reads the keys of the complete lines and runs only the rest.

Each line says how its episode ended (``outcome``, ``infra_kind``: see ``records.py``).
A line whose episode ended on an infrastructure fault is not final: resume takes it out
of the file (into ``_infra/results.jsonl``) and runs the episode again.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Literal

import structlog
from pydantic import BaseModel, Field, model_validator

from linewise.apps.bench.plan import EpisodeKey, EpisodeSpec
from linewise.errors import TraceWriteError
from linewise.files import write_atomically
from linewise.jsonl import append_line, split_lines
from linewise.records import (
    FINAL_OUTCOMES,
    EpisodeSummary,
    InfraKind,
    Outcome,
    ReplaySummary,
    StepRecord,
    outcome_of,
    utcnow,
)
from linewise.runtime.redaction import redacted_json
from linewise.runtime.replay.origin import recorded_run

log = structlog.get_logger(__name__)

RESULTS_FILE = "results.jsonl"

ErrorKind = Literal["crash", "timeout", "page", "model", "task"]
ERROR_KINDS: tuple[ErrorKind, ...] = ("crash", "timeout", "page", "model", "task")

_ERROR_KIND_OF_INFRA: dict[InfraKind, ErrorKind] = {
    "model": "model", "refused": "model", "config": "model", "server": "model",
    "browser": "page", "timeout": "timeout", "task": "task", "output": "task",
    "crash": "crash",
}
"""The report's error kind of each infrastructure kind: the report groups the model
endpoint, a configuration it cannot serve and the embedded model's server as ``model``,
and an output folder that cannot be written with what cannot be set up (``task``)."""

_INFRA_OF_ERROR_KIND: dict[str, InfraKind] = {
    "crash": "crash", "timeout": "timeout", "page": "browser", "model": "model",
    "task": "task",
}
"""For lines written before endings were classified: their error kind says enough."""


class EpisodeResult(BaseModel):
    """One finished episode, as the report reads it."""

    task_id: str
    base_task: str
    benchmark: str
    seed: int
    filter: str
    agent: str = Field(description="The action model.")
    retriever_model: str = ""
    success: bool | None
    reward: float = 0.0
    n_steps: int = 0
    max_steps: int = 0
    termination: str = ""
    error: str | None = None
    error_kind: ErrorKind | None = None
    outcome: Outcome = Field(
        default="agent", description="Whose ending this is (records.outcome_of)."
    )
    infra_kind: InfraKind | None = None
    action_prompt_tokens: int = 0
    action_completion_tokens: int = 0
    retriever_prompt_tokens: int = 0
    retriever_completion_tokens: int = 0
    llm_calls: int = 0
    repeats_escaped: int = Field(default=0, description="Futile repeats a re-ask replaced.")
    repeats_kept: int = Field(default=0, description="Futile repeats every re-ask kept.")
    blocked_navigations: int = Field(default=0, description="Page loads the policy refused.")
    refused_connections: int = Field(
        default=0, description="Other requests the policy refused (sub-resources, sockets, "
        "redirect hops).")
    action_errors: int = Field(default=0, description="Steps whose action failed.")
    parse_errors: int = Field(default=0, description="Steps with no usable action.")
    assisted_steps: int = Field(
        default=0, description="Steps a person decided (outcome 'assisted' when any)."
    )
    hook_steps: int = Field(
        default=0, description="Steps whose action a hook's code replaced (outcome "
        "'hooked' when any)."
    )
    skill_steps: int = Field(default=0, description="Steps skills ran (run_skill).")
    replay: ReplaySummary | None = Field(
        default=None, description="The episode replayed a program (outcome 'replayed' "
        "or 'healed'): its steps replayed and healed, and where it diverged.")
    recorded_llm_calls: int | None = Field(
        default=None, description="For a replay: the model calls of the agent's episode "
        "its program was recorded from (None: that episode was not found).")
    recorded_tokens: int | None = Field(
        default=None, description="For a replay: that episode's model tokens (action "
        "and retriever, prompt and completion).")
    obs_tokens_full: int = 0
    obs_tokens_shown: int = 0
    reduction: float | None = Field(
        default=None, description="Mean over steps of the tokens the filter cut: 1 - "
        "shown/full, the full tree rendered as the view renders its lines (a view that "
        "keeps every line cuts nothing)."
    )
    lines_kept: float | None = Field(
        default=None, description="Mean over steps of the share of the tree's lines the "
        "view kept (context lines aside).")
    step_obs_tokens: list[tuple[int, int]] = Field(
        default_factory=list, description="(full tree tokens, tokens shown) per step."
    )
    step_reductions: list[float] = Field(
        default_factory=list, description="The cut of each step (see ``reduction``), in "
        "the order of ``step_obs_tokens``; empty in results written before it existed.")
    wall_s: float = 0.0
    llm_s: float = 0.0
    filter_s: float = 0.0
    episode_dir: str = Field(default="", description="Relative to the bench folder.")
    backend: str = "local"
    recovered: bool = Field(
        default=False, description="Read back from the episode folder on resume."
    )
    finished_at: datetime = Field(default_factory=utcnow)

    @model_validator(mode="before")
    @classmethod
    def _classify_old_lines(cls, data: object) -> object:
        if isinstance(data, dict) and "outcome" not in data:
            kind = data.get("error_kind")
            infra = _INFRA_OF_ERROR_KIND.get(kind) if isinstance(kind, str) else None
            data = {**data, "infra_kind": infra,
                    "outcome": outcome_of(str(data.get("termination", "")), infra)}
        return data

    @property
    def key(self) -> EpisodeKey:
        return EpisodeKey(self.task_id, self.seed, self.filter)

    @property
    def is_final(self) -> bool:
        """Whether the line stands: an infrastructure or stopped ending runs again."""
        return self.outcome in FINAL_OUTCOMES

    @property
    def action_tokens(self) -> int:
        return self.action_prompt_tokens + self.action_completion_tokens

    @property
    def retriever_tokens(self) -> int:
        return self.retriever_prompt_tokens + self.retriever_completion_tokens


def error_kind_of(
    termination: str, infra_kind: InfraKind | None, error: str | None
) -> ErrorKind | None:
    """The report's error kind of an ending, from what failed around the agent
    (``infra_kind``, recorded by the runtime from the exception itself). An ending with
    no infrastructure kind is the agent's: no error kind unless it carries an error (a
    stop, an error of the agent's own), which counts as ``crash``."""
    if infra_kind is not None:
        return _ERROR_KIND_OF_INFRA[infra_kind]
    if termination == "timeout":
        return "timeout"
    if termination == "diverged":
        return None
    return "crash" if error else None


SUMMARY_ONLY: frozenset[str] = frozenset({
    "trace_version", "episode_id", "goal", "start_url", "status", "answer",
    "infeasible_reason", "action_model", "tokens", "time", "filter_misses",
    "downloads_saved", "downloads_refused", "attack", "traceback", "budget_stop",
    "started_at", "finished_at", "directory", "observe_s", "act_s", "agent_success",
    "task",
})
"""Summary values a results line leaves to the episode's own summary.json (the report
does not read them; ``finished_at`` is the line's own time). Every other value of
``summary_values`` is a field of ``EpisodeResult`` of the same name, so that a new
summary field is either carried or listed here (tests/apps/bench checks it)."""


def summary_values(summary: EpisodeSummary) -> dict[str, object]:
    """The summary's values under the names of a results line: its own fields (the
    computed ones included), its token totals as ``<kind>_tokens`` (``llm_calls`` as
    is) and its times, with the action model as ``agent``."""
    values: dict[str, object] = dict(summary)
    values.update({name: getattr(summary, name) for name in type(summary).model_computed_fields})
    values.update({name if name == "llm_calls" else f"{name}_tokens": value
                   for name, value in summary.tokens})
    values.update(summary.time)
    values["agent"] = summary.action_model
    return values


def step_reduction(step: StepRecord) -> float:
    """The tokens a step's filter cut (``FilterRecord.reduction``: against the whole
    tree rendered as its view renders lines); for a step whose trace holds no filter
    record, 1 - shown/full."""
    if step.filter_result.total_lines > 0:
        return step.filter_result.reduction
    full, shown = step.obs_tokens_full, step.obs_tokens_shown
    return max(0.0, 1 - shown / full) if full > 0 else 0.0


def result_from_summary(
    spec: EpisodeSpec,
    summary: EpisodeSummary,
    steps: list[StepRecord],
    *,
    backend: str,
    recovered: bool = False,
) -> EpisodeResult:
    """The results line of an episode that ran (its summary and steps)."""
    values = summary_values(summary)
    pairs = [(s.obs_tokens_full, s.obs_tokens_shown) for s in steps]
    cuts = [step_reduction(s) for s in steps]
    reductions = [cut for s, cut in zip(steps, cuts, strict=True) if s.obs_tokens_full > 0]
    kept = [s.filter_result.kept_lines / s.filter_result.total_lines for s in steps
            if s.filter_result.total_lines > 0]
    carried = {name: value for name, value in values.items()
               if name in EpisodeResult.model_fields and name not in SUMMARY_ONLY}
    recorded = recorded_run(summary.replay.program) if summary.replay is not None else None
    return EpisodeResult.model_validate({
        **carried,
        "task_id": spec.task.id,
        "base_task": spec.base_task,
        "benchmark": spec.benchmark,
        "seed": spec.seed,
        "filter": spec.filter,
        "max_steps": spec.task.max_steps,
        "error_kind": error_kind_of(summary.termination, summary.infra_kind, summary.error),
        "reduction": sum(reductions) / len(reductions) if reductions else None,
        "lines_kept": sum(kept) / len(kept) if kept else None,
        "step_obs_tokens": pairs,
        "step_reductions": cuts,
        "episode_dir": spec.relative_folder(),
        "backend": backend,
        "recovered": recovered,
        "recorded_llm_calls": recorded.tokens.llm_calls if recorded is not None else None,
        "recorded_tokens": recorded.tokens.total if recorded is not None else None,
    })


def failed_result(
    spec: EpisodeSpec, infra_kind: InfraKind | None, error: str, *, agent: str,
    backend: str, wall_s: float = 0.0,
) -> EpisodeResult:
    """The results line of an episode that could not produce a summary of its own: the
    runtime failed around it, an infrastructure ending of ``infra_kind`` (``crash``
    when the error that escaped names no kind: nothing should escape)."""
    infra_kind = infra_kind or "crash"
    termination = "timeout" if infra_kind == "timeout" else "error"
    return EpisodeResult(
        task_id=spec.task.id, base_task=spec.base_task, benchmark=spec.benchmark,
        seed=spec.seed, filter=spec.filter, agent=agent, success=False,
        max_steps=spec.task.max_steps, termination=termination, error=error,
        error_kind=error_kind_of(termination, infra_kind, error), outcome="infrastructure",
        infra_kind=infra_kind, wall_s=wall_s, episode_dir=spec.relative_folder(),
        backend=backend,
    )


class ResultsWriter:
    """Appends results lines, each whole or not at all (``jsonl.append_line``);
    thread-safe (the BrowserGym backend writes from threads). A line the disk refuses
    is a ``TraceWriteError``: the bench stops."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _cut_torn_tail(path)
            path.touch()
        except OSError as exc:
            raise TraceWriteError.of(path, exc) from exc
        self._lock = threading.Lock()

    def append(self, result: EpisodeResult) -> None:
        line = redacted_json(result) + "\n"
        with self._lock:
            try:
                append_line(self.path, line)
            except OSError as exc:
                raise TraceWriteError.of(self.path, exc) from exc

    def close(self) -> None:
        """Nothing stays open between lines."""

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line without its newline: a write the previous run did not finish."""
    if not path.exists():
        return
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    log.warning("results.jsonl: dropping a torn last line", path=str(path),
                bytes=len(data) - keep)
    with path.open("r+b") as handle:
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())


def read_results(path: Path) -> list[EpisodeResult]:
    """Every complete line of a results file, first occurrence of a key winning.

    A torn or invalid line is skipped (with a warning unless it is the last one, which is
    what a kill mid-write leaves); a missing file is an empty bench.
    """
    if not path.exists():
        return []
    # A line that is not UTF-8 becomes an invalid line, skipped with a warning.
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    results: list[EpisodeResult] = []
    seen: set[EpisodeKey] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            result = EpisodeResult.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValueError) as exc:
            if number < len(lines):  # not the torn tail a kill mid-write leaves
                log.warning("results.jsonl: skipping an invalid line", line=number,
                            error=str(exc)[:200])
            continue
        if result.key in seen:
            log.warning("results.jsonl: duplicate episode ignored", episode=str(result.key))
            continue
        seen.add(result.key)
        results.append(result)
    return results


def take_out(path: Path, keys: set[EpisodeKey], archive: Path) -> list[EpisodeResult]:
    """Remove the lines of ``keys`` from a results file (rewritten atomically) and
    append them to ``archive``; return them. Nothing is lost: the archive keeps every
    ending that was taken back."""
    if not keys or not path.exists():
        return []
    kept: list[str] = []
    taken: list[EpisodeResult] = []
    # Lines end at "\n" only (linewise/jsonl.py): cut at a U+2028 in an error message, a
    # line would be written back as two halves that are not JSON.
    for line in split_lines(path.read_bytes().decode("utf-8", errors="surrogateescape")):
        try:
            result = EpisodeResult.model_validate(json.loads(line)) if line.strip() else None
        except (json.JSONDecodeError, ValueError, RecursionError):
            result = None
        if result is not None and result.key in keys:
            taken.append(result)
        elif line.strip():
            kept.append(line)
    if not taken:
        return []
    archive.parent.mkdir(parents=True, exist_ok=True)
    with archive.open("a", encoding="utf-8") as handle:
        handle.writelines(r.model_dump_json() + "\n" for r in taken)
        handle.flush()
        os.fsync(handle.fileno())
    # a line that was not UTF-8 stays as it was
    write_atomically(path, "".join(line + "\n" for line in kept), durable=True,
                     errors="surrogateescape")
    return taken
