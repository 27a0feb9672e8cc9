"""The records of a run: what one step, one LLM call and one episode were.

These pydantic models are the trace format (``steps.jsonl``, ``summary.json``) and the
values the agent, the filters and the loop hand each other; ``runtime/trace.py`` writes
and reads them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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


class TargetBox(BaseModel):
    """Where the acted-on element was, in CSS pixels of the viewport, just before the
    action ran: the same coordinates as the step's screenshot."""

    x: float
    y: float
    width: float
    height: float


class StepTimings(BaseModel):
    observe_ms: float = 0.0
    agent_ms: float = 0.0
    act_ms: float = 0.0
    settle_ms: float = 0.0
    total_ms: float = 0.0


class Tab(BaseModel):
    """One open tab of the episode's browser context."""

    model_config = ConfigDict(frozen=True)

    index: int
    url: str
    title: str
    active: bool


class FilterRecord(BaseModel):
    """What the observation filter did this step."""

    name: str = "none"
    ranges: list[tuple[int, int]] = Field(default_factory=list)
    kept_lines: int = 0
    kept_ranges: list[tuple[int, int]] = Field(
        default_factory=list,
        description="Exactly the lines kept, as inclusive 1-based runs (compact even when a "
        "filter keeps every line of a huge page). Empty in traces written before it existed.",
    )
    context_lines: list[int] = Field(
        default_factory=list,
        description="1-based lines shown shortened as ancestors of kept lines.",
    )
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
    tabs: list[Tab] = Field(default_factory=list)
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
    target_box: TargetBox | None = Field(
        default=None, description="The box of the action's first element, if it had one."
    )
    reward: float = 0.0
    done: bool = False
    screenshot: str | None = Field(default=None, description="Path relative to the episode folder.")
    timings: StepTimings = Field(default_factory=StepTimings)
    hook_notes: dict[str, Any] = Field(
        default_factory=dict, description="What the step's hooks recorded (StepHooks)."
    )


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
