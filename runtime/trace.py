"""Trace records and the writer that puts them on disk as the episode runs.

One folder per episode::

    <episode>/steps.jsonl          one StepRecord per line, appended and flushed each step
    <episode>/screenshots/step-NNN.png
    <episode>/summary.json         EpisodeSummary; status "running" until the episode ends

A kill at any moment loses at most the step in flight: every finished step is already
on disk, and summary.json says the episode never finished.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

TRACE_VERSION = 1


def utcnow() -> datetime:
    return datetime.now(UTC)


class LLMCall(BaseModel):
    """One request to a model endpoint and what came back."""

    purpose: Literal["action", "retriever", "other"]
    model: str
    base_url: str
    messages: list[dict[str, Any]]
    response: str | None = None
    prompt_tokens: int = Field(description="tiktoken count of the messages (o200k_base).")
    completion_tokens: int = Field(default=0, description="tiktoken count of the response.")
    usage: dict[str, Any] | None = Field(default=None, description="What the server reported.")
    latency_ms: float = 0.0
    started_at: datetime = Field(default_factory=utcnow)
    attempt: int = 0
    error: str | None = None


class StepTimings(BaseModel):
    observe_ms: float = 0.0
    agent_ms: float = 0.0
    act_ms: float = 0.0
    settle_ms: float = 0.0
    total_ms: float = 0.0


class TabRecord(BaseModel):
    index: int
    url: str
    title: str
    active: bool


class FilterRecord(BaseModel):
    """What the observation filter did this step."""

    name: str = "none"
    ranges: list[tuple[int, int]] = Field(default_factory=list)
    kept_lines: int = 0
    total_lines: int = 0
    tokens_full: int = 0
    tokens_shown: int = 0
    reduction: float = 0.0
    latency_ms: float = 0.0
    retriever_prompt_tokens: int = 0
    retriever_completion_tokens: int = 0
    fallback_reason: str | None = None
    misses: list[str] = Field(
        default_factory=list,
        description="Bids the action model used that the filtered view did not show.",
    )
    notes: dict[str, Any] = Field(default_factory=dict)


RepeatEscape = Literal["escaped", "kept"]
"""What became of an answer that repeated an action which had changed nothing."""


class StepRecord(BaseModel):
    """Everything about one step: what was seen, asked, answered and done."""

    trace_version: int = TRACE_VERSION
    episode_id: str
    task_id: str
    index: int
    started_at: datetime = Field(default_factory=utcnow)
    url: str
    title: str = ""
    tabs: list[TabRecord] = Field(default_factory=list)
    focused_bid: str = ""
    last_action_error: str | None = Field(
        default=None, description="The error of the previous step's action, as the model saw it."
    )
    axtree: str = Field(description="The full AXTree, every line numbered from 1.")
    axtree_lines: int = 0
    observation: str = Field(description="The AXTree text shown to the action model.")
    filter: str = "none"
    obs_tokens_full: int = 0
    obs_tokens_shown: int = 0
    filter_result: FilterRecord = Field(default_factory=FilterRecord)
    llm_calls: list[LLMCall] = Field(default_factory=list)
    think: str | None = None
    action: str | None = Field(default=None, description="The action run, in canonical form.")
    action_raw: str | None = Field(
        default=None, description="The action text as the model wrote it."
    )
    parse_error: str | None = None
    repeat_escape: RepeatEscape | None = Field(
        default=None,
        description="The first answer repeated an action that had changed nothing; "
        "'escaped': a re-ask chose another action, 'kept': every re-ask repeated it.",
    )
    action_error: str | None = None
    reward: float = 0.0
    done: bool = False
    screenshot: str | None = Field(default=None, description="Path relative to the episode folder.")
    timings: StepTimings = Field(default_factory=StepTimings)


class TokenTotals(BaseModel):
    action_prompt: int = 0
    action_completion: int = 0
    retriever_prompt: int = 0
    retriever_completion: int = 0
    llm_calls: int = 0

    def add(self, call: LLMCall) -> None:
        self.llm_calls += 1
        if call.purpose == "retriever":
            self.retriever_prompt += call.prompt_tokens
            self.retriever_completion += call.completion_tokens
        else:
            self.action_prompt += call.prompt_tokens
            self.action_completion += call.completion_tokens

    @property
    def total(self) -> int:
        return (
            self.action_prompt
            + self.action_completion
            + self.retriever_prompt
            + self.retriever_completion
        )


class TimeTotals(BaseModel):
    wall_s: float = 0.0
    llm_s: float = 0.0
    filter_s: float = 0.0
    observe_s: float = 0.0
    act_s: float = 0.0


Termination = Literal[
    "running", "task_done", "agent_done", "infeasible", "max_steps", "error", "timeout"
]


class EpisodeSummary(BaseModel):
    """The outcome of one episode; rewritten when it ends."""

    trace_version: int = TRACE_VERSION
    episode_id: str
    task_id: str
    goal: str = ""
    start_url: str = ""
    status: Literal["running", "finished", "failed"] = "running"
    termination: Termination = "running"
    success: bool | None = None
    reward: float = 0.0
    n_steps: int = 0
    answer: str | None = Field(default=None, description="The agent's last message to the user.")
    infeasible_reason: str | None = None
    action_model: str = ""
    retriever_model: str = ""
    filter: str = "none"
    tokens: TokenTotals = Field(default_factory=TokenTotals)
    obs_tokens_full: int = Field(default=0, description="Sum over steps of full-tree tokens.")
    obs_tokens_shown: int = Field(default=0, description="Sum over steps of tokens shown.")
    filter_misses: int = 0
    repeats_escaped: int = Field(default=0, description="Steps with repeat_escape 'escaped'.")
    repeats_kept: int = Field(default=0, description="Steps with repeat_escape 'kept'.")
    time: TimeTotals = Field(default_factory=TimeTotals)
    error: str | None = None
    traceback: str | None = None
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None

    def add_step(self, record: StepRecord) -> None:
        """Count a finished step into the totals."""
        self.n_steps = record.index + 1
        self.reward = record.reward
        for call in record.llm_calls:
            self.tokens.add(call)
            self.time.llm_s += call.latency_ms / 1000
        self.obs_tokens_full += record.obs_tokens_full
        self.obs_tokens_shown += record.obs_tokens_shown
        self.filter_misses += len(record.filter_result.misses)
        self.repeats_escaped += record.repeat_escape == "escaped"
        self.repeats_kept += record.repeat_escape == "kept"
        self.time.filter_s += record.filter_result.latency_ms / 1000

    def mark_failed(self, termination: Termination, message: str, trace: str | None) -> None:
        """The episode ended in trouble: ``termination`` says which kind."""
        self.status = "failed"
        self.termination = termination
        self.error = message
        self.traceback = trace
        self.success = False

    def mark_ended(self, wall_s: float) -> None:
        """Stamp the end; an episode still "running" here was cut short (Ctrl-C, timeout)."""
        self.time.wall_s = wall_s
        self.finished_at = utcnow()
        if self.status == "running":
            self.status = "failed"
            self.termination = "error"
            self.error = self.error or "episode was interrupted"


def safe_name(text: str) -> str:
    """A folder name made from a task id."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return name[:120] or "episode"


class EpisodeTraceWriter:
    """Writes one episode's folder. Steps are appended, flushed and fsynced as they end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.screenshots = directory / "screenshots"
        self.steps_path = directory / "steps.jsonl"
        self.summary_path = directory / "summary.json"

    def start(self, summary: EpisodeSummary) -> None:
        self.screenshots.mkdir(parents=True, exist_ok=True)
        self.steps_path.touch()
        self.write_summary(summary)

    def write_screenshot(self, index: int, png: bytes) -> str:
        name = f"step-{index:03d}.png"
        (self.screenshots / name).write_bytes(png)
        return f"screenshots/{name}"

    def write_step(self, record: StepRecord) -> None:
        line = record.model_dump_json() + "\n"
        with self.steps_path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def write_summary(self, summary: EpisodeSummary) -> None:
        tmp = self.summary_path.with_suffix(".json.tmp")
        tmp.write_text(summary.model_dump_json(indent=2), encoding="utf-8")
        os.replace(tmp, self.summary_path)


def read_steps(directory: Path) -> list[StepRecord]:
    """The steps of an episode folder; a torn last line (a kill mid-write) is ignored."""
    steps: list[StepRecord] = []
    path = directory / "steps.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            steps.append(StepRecord.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValueError):
            break
    return steps


def read_summary(directory: Path) -> EpisodeSummary:
    return EpisodeSummary.model_validate_json((directory / "summary.json").read_text("utf-8"))
