"""The records of a run: what one step, one LLM call and one episode were.

These pydantic models are the trace format (``steps.jsonl``, ``summary.json``) and the
values the agent, the filters and the loop hand each other; ``runtime/trace.py`` writes
and reads them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

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
    raw_body: str | None = Field(
        default=None,
        description="The endpoint's body when it was not a usable chat completion "
        "(invalid JSON, no choices): kept so that nothing answered is lost.",
    )


class TargetBox(BaseModel):
    """Where the acted-on element was, in CSS pixels, just before the action ran: the
    same coordinates as the step's screenshot (of the viewport, or of the part of it
    the screenshot was cut to: ``StepRecord.screenshot_clip``). Also that part itself,
    in the viewport's coordinates."""

    x: float
    y: float
    width: float
    height: float


class TargetLocator(BaseModel):
    """How to find an element an action named again, in another tree of the same page
    (``linewise/locators.py`` builds and resolves it): what the element is (role, name,
    value or label when it has no name), where it is (its named ancestors, the heading it
    is under, the frames it is in) and which of the elements that match it equally it
    was. Never its bid alone: a bid is only valid in the tree it was read from."""

    model_config = ConfigDict(frozen=True)

    bid: str = Field(description="The element's bid in the tree it was read from.")
    role: str
    name: str = Field(default="", description="The accessible name, whitespace collapsed.")
    value: str | None = Field(
        default=None, description="The element's value, for an element with no name.")
    label: str | None = Field(
        default=None, description="For an element with no name: the text closest before "
        "it among its siblings (a form's 'Username' before its textbox).")
    text: str | None = Field(
        default=None, description="For an element with no name and no value: the text "
        "shown inside it (a clickable span's words), which identifies it as a name does.")
    context: tuple[str, ...] = Field(
        default=(), description="Its named ancestors, outermost first, as ``role 'name'``: the "
        "3 innermost, never the document (its name is the page title) nor a frame.")
    heading: str | None = Field(
        default=None, description="The text of the closest heading before it, in its frame. "
        "Not part of equality: it only narrows a choice among equal elements.")
    frames: tuple[str, ...] = Field(
        default=(), description="The frames it lies in, outermost first, as ``Iframe "
        "'name'``; empty in the top document.")
    ordinal: int = Field(
        default=0, description="Its place (from 0) among the elements of the tree that "
        "match it equally (the same role, name, value, label, context and frames).")
    matches: int = Field(
        default=1, description="How many elements of the tree matched it equally.")
    ordinal_parameter: str | None = Field(
        default=None, description="In a skill: the parameter that says which of the equal "
        "elements it is (``3rd`` in 'the 3rd textbox'). Binding sets ``ordinal`` from it, "
        "and how many elements match equally is then the page's, not the recording's.")


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
    tokens_full_view: int | None = Field(
        default=None, description="Tokens of the whole tree rendered as the view renders "
        "its lines: the baseline of ``reduction`` (None: ``tokens_full``).")
    reduction: float = 0.0
    latency_ms: float = 0.0
    retriever_prompt_tokens: int = 0
    retriever_completion_tokens: int = 0
    fallback_reason: str | None = None
    misses: list[str] = Field(
        default_factory=list,
        description="Bids the action model used that the full tree had but the filtered "
        "view did not show (a bid in no line of the tree is not the filter's miss: "
        "``StepRecord.absent_bids``).",
    )
    notes: dict[str, Any] = Field(default_factory=dict)


class SkippedFrame(BaseModel):
    """A frame the observation left out because it did not answer within its deadline
    (e.g. an iframe whose source Chromium refused: its scripts never run)."""

    model_config = ConfigDict(frozen=True)

    url: str
    reason: str


class DialogRecord(BaseModel):
    """A JavaScript dialog the page opened, and what the runtime did with it."""

    model_config = ConfigDict(frozen=True)

    type: str = Field(description="alert, confirm, prompt or beforeunload.")
    message: str
    handled: Literal["dismissed", "accepted"]
    url: str = ""


StepStage = Literal["observe", "filter", "decide", "act", "status"]

Operator = Literal["approved", "overridden", "skipped", "manual", "stopped"]
"""What a person decided at a step-through prompt (``linewise run --step``): ran the
model's action, ran another one instead, ran nothing, acted in the browser by hand, or
stopped the episode. Only ``approved`` steps carry the model's own action."""

HUMAN_OPERATORS: frozenset[str] = frozenset({"overridden", "skipped", "manual", "stopped"})
"""Decisions after which the step's action (or its absence) is a person's, not the model's."""

ASSISTING_OPERATORS: frozenset[str] = frozenset({"overridden", "skipped", "manual"})
"""Decisions that changed the episode's course: once a person ran another action, kept
the model's from running or worked by hand, what the episode achieved is not the
agent's alone (``stopped`` ends it instead)."""


class PageState(BaseModel):
    """A page as a person left or found it around a manual step."""

    url: str
    title: str = ""
    axtree_lines: int = 0
    screenshot: str | None = Field(default=None, description="Path relative to the episode folder.")


class ManualStep(BaseModel):
    """A person worked in the browser by hand during this step (``operator`` manual)."""

    before: PageState
    after: PageState


class StepFailure(BaseModel):
    """Why a step did not finish: what was recorded up to then is kept with it."""

    stage: StepStage
    kind: str = Field(
        description="The error's kind: 'stalled' (a deadline passed), 'browser_crash', "
        "'renderer_crash', 'timeout' (the episode's), 'interrupted' or the exception's class."
    )
    message: str


NavigationInitiator = Literal["model", "page", "redirect", "popup", "frame"]
"""Who started a navigation: the model's action, the page itself (a link, a script, a
meta refresh), a redirect hop, a new tab the page opened, or an iframe."""


class BlockedNavigation(BaseModel):
    """A page load the navigation policy refused (runtime/browser/navigation.py)."""

    model_config = ConfigDict(frozen=True)

    url: str
    reason: str
    initiator: NavigationInitiator
    from_url: str = Field(default="", description="The page (or redirect) it came from.")


class DownloadRecord(BaseModel):
    """A download a page started: saved into the episode folder, or refused."""

    model_config = ConfigDict(frozen=True)

    url: str
    filename: str = Field(description="The name the server suggested.")
    saved_as: str | None = Field(default=None, description="Relative to the episode folder.")
    refused: str | None = None


class RefusedConnection(BaseModel):
    """Requests to one host that the policy refused, for one reason, in one step: a
    page's sub-resources, WebSockets, workers' fetches, the hops of their redirects and
    every other connection the policy proxy refused (an exfiltration attempt shows
    here), and sub-resources the route refused."""

    model_config = ConfigDict(frozen=True)

    host: str = Field(description="host:port as the browser asked for it (the scheme, "
                      "for a URL without a host).")
    reason: str
    count: int = Field(default=1, description="How many such requests the step saw.")


class NavigationEvents(BaseModel):
    """What the navigation guard saw since it was last asked."""

    blocked: list[BlockedNavigation] = Field(default_factory=list)
    downloads: list[DownloadRecord] = Field(default_factory=list)
    refused_connections: list[RefusedConnection] = Field(default_factory=list)
    refused_connections_more: int = Field(
        default=0, description="Refused requests not listed: their host and reason came "
        "after the list was full.")


RepeatEscape = Literal["escaped", "kept"]
"""What became of an answer that repeated an action which had changed nothing."""

ActionDecoding = Literal["free", "grammar", "refused"]
"""How the action answer was decoded: ``grammar``: under the action grammar
(agent/action_grammar.py); ``free``: without one; ``refused``: the endpoint refused the
grammar (HTTP 400) and was asked again without it."""


class AnswerCheckRecord(BaseModel):
    """A question goal's step whose action did not answer: was the answer in the model's
    own reasoning (agent/answer_check.py)?"""

    replaced: str = Field(description="The action the model chose, as it wrote it.")
    answer: str | None = Field(
        default=None, description="The answer taken from the reasoning; the step sent it "
        "with send_msg_to_user instead of the action.")
    rejected: str | None = Field(
        default=None, description="An answer the model gave that was not taken, and why.")


class MemoryShown(BaseModel):
    """The experience memory's worked examples a step's prompt showed (``--memory``)."""

    entries: list[str] = Field(default_factory=list, description="The entries' ids, in order.")
    retrieval: Literal["lexical", "lexical+embedding"] = "lexical"
    note: str | None = Field(
        default=None, description="Why retrieval was lexical only, when it was."
    )
    tokens: int = Field(default=0, description="Tokens of the examples block.")


ReplayMode = Literal["replayed", "healed"]
"""How a step of a replay came about: ``replayed``: the recorded action ran on the
element its locator found, no model asked; ``healed``: the recorded step could not be
replayed (its element was not found uniquely, or its effect was not the recorded one)
and the action model chose this action, told what the recorded step meant to do."""

DivergenceReason = Literal["none", "several", "changed_role", "effect", "action_error",
                           "program_ended", "heal_failed"]
"""Why a recorded step could not be replayed as recorded: its element was found nowhere
(``none``), among several equal ones (``several``), with another role
(``changed_role``); it ran without the recorded effect (``effect``) or failed
(``action_error``); the program ran out before the task ended (``program_ended``); or
the model's healing did not bring the episode back onto the program (``heal_failed``)."""


class ReplayStep(BaseModel):
    """What a replay did at one step (``StepRecord.replay``)."""

    mode: ReplayMode
    program_step: int = Field(description="The program's step (from 0) this step stood for.")
    recorded_action: str = Field(description="The action as the program recorded it.")
    resolved: dict[str, str] = Field(
        default_factory=dict,
        description="Each recorded bid and the bid its locator found on this page.")
    divergence: DivergenceReason | None = Field(
        default=None, description="Why the recorded step was healed instead of replayed.")
    detail: str = Field(default="", description="What was looked for and found, in words.")
    skill: str | None = Field(
        default=None, description="The skill whose step this was (``run_skill``).")
    skill_start: Literal["model", "goal"] | None = Field(
        default=None, description="On a skill's first step: who started it: the action "
        "model's call, or the goal fitting the skill's template (``agent.skill_start``).")


class ReplaySummary(BaseModel):
    """An episode that replayed a program (``linewise replay``, ``--replay-cache``)."""

    program: str = Field(description="Where the program came from (a folder or file).")
    program_steps: int = 0
    replayed_steps: int = 0
    healed_steps: int = 0
    diverged_at: int | None = Field(
        default=None, description="The program step at which the replay ended unhealed.")
    fell_back_at: int | None = Field(
        default=None, description="The program step from which the model went on as an "
        "ordinary agent, healing having failed (the replay cache's fallback).")
    divergence: DivergenceReason | None = None
    detail: str = ""


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
    action_decoding: ActionDecoding = "free"
    answer_check: AnswerCheckRecord | None = Field(
        default=None, description="The reasoning was checked for the answer "
        "(--answer-check); set when the check ran.")
    memory: MemoryShown | None = Field(
        default=None, description="The memory's examples in this step's prompt (--memory)."
    )
    reasks_stopped: str | None = Field(
        default=None, description="A re-ask was not made: the spending limit it met."
    )
    action_error: str | None = None
    absent_bids: list[str] = Field(
        default_factory=list,
        description="Bids the action named that no line of the full tree had (the model "
        "guessed them): not a filter miss.",
    )
    target_box: TargetBox | None = Field(
        default=None, description="The box of the action's first element, if it had one."
    )
    targets: list[TargetLocator] = Field(
        default_factory=list,
        description="A locator of each element the action named, from the observed tree "
        "(``linewise/locators.py``): how a replay finds it again on another load of the "
        "page. Empty in traces written before it existed (``locators_of`` derives them).",
    )
    replay: ReplayStep | None = Field(
        default=None, description="Set when the step belonged to a replay.")
    reward: float = 0.0
    done: bool = False
    screenshot: str | None = Field(default=None, description="Path relative to the episode folder.")
    screenshot_clip: TargetBox | None = Field(
        default=None, description="The part of the viewport the screenshot shows, when it "
        "was cut to the page's content (MiniWoB++ tasks); None: the whole viewport.")
    timings: StepTimings = Field(default_factory=StepTimings)
    hook_notes: dict[str, Any] = Field(
        default_factory=dict, description="What the step's hooks recorded (StepHooks)."
    )
    skipped_frames: list[SkippedFrame] = Field(
        default_factory=list, description="Frames the observation could not read in time."
    )
    dialogs: list[DialogRecord] = Field(
        default_factory=list, description="Dialogs the page opened since the last step."
    )
    failure: StepFailure | None = Field(
        default=None,
        description="The step ended in trouble after the model answered: the answer is "
        "kept, and this says which stage failed and why.",
    )
    blocked: list[BlockedNavigation] = Field(
        default_factory=list, description="Page loads the navigation policy refused."
    )
    downloads: list[DownloadRecord] = Field(default_factory=list)
    refused_connections: list[RefusedConnection] = Field(
        default_factory=list,
        description="Other requests the policy refused in the step (sub-resources, "
        "sockets, redirect hops), one entry per host and reason with a count, at most "
        "20 entries (guard_rules.REFUSED_LISTED).")
    refused_connections_more: int = Field(
        default=0, description="Refused requests beyond the listed hosts and reasons.")
    operator: Operator | None = Field(
        default=None,
        description="A person's decision at the step-through prompt; None when nobody was "
        "asked (the model's action ran unreviewed).",
    )
    model_action: str | None = Field(
        default=None,
        description="The model's own action when a person overrode, skipped or replaced "
        "it by hand, or a hook's code replaced it (``action`` is then what ran, if "
        "anything).",
    )
    hook_replaced: bool = Field(
        default=False,
        description="A hook's code ran another action than the model's, or none "
        "(``step.replace_action``, a ``before_act`` hook) while no person decided the "
        "step: the action is code's, not the model's (its own in ``model_action``).",
    )
    manual: ManualStep | None = Field(
        default=None, description="The page before and after a person's work by hand."
    )
    invisible_text: dict[str, int] = Field(
        default_factory=dict,
        description="Nodes of text a person cannot see that the observation dropped or "
        "marked (browser.invisible_text), by reason (off-screen, opacity, colour...).",
    )

    def tree_lines(self) -> list[str]:
        """The full AXTree's lines as the page gave them, without their numbers."""
        if not self.axtree:
            return []
        return [line.partition("|")[2] for line in self.axtree.split("\n")]


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
    "running", "task_done", "agent_done", "infeasible", "max_steps", "error", "timeout",
    "budget", "stalled", "browser_crash", "renderer_crash", "interrupted", "user_stopped",
    "diverged",
]
"""How an episode ended. ``budget``: a spending limit (``--max-cost``, ``--max-tokens``,
or the run's) stopped it: neither the agent's failure nor an infrastructure fault.
``stalled``: a browser operation passed its deadline; ``browser_crash``: Chromium died or
disconnected (it is relaunched for the next episodes); ``renderer_crash``: the tab's
renderer crashed; ``interrupted``: the user stopped the run (Ctrl+C); ``user_stopped``: a
person quit at the step-through prompt (``linewise run --step``); ``diverged``: a replay
without a model (``--no-model``) met a step it could not replay (``ReplaySummary`` says
which and why)."""

# ------------------------------------------------------------- how an episode ended
#
# Every ending is one of four outcomes, so that a benchmark's numbers never mix the
# agent's results with faults of the machinery around it:
#
# - ``agent``: the agent's own result, judged: success, a wrong answer, the step limit,
#   action or parse errors, ``agent_done``, ``infeasible``, and a model answer that never
#   came in the asked-for format. Only these count in a success rate.
# - ``infrastructure``: something around the agent failed (``InfraKind`` says what). The
#   episode says nothing about the agent: its partial trace is set aside and
#   ``bench --resume`` runs it again.
# - ``budget``: a resource limit of the run (not of the task) ended it.
# - ``stopped``: the user or the runtime stopped it before its end (Ctrl+C).
# - ``assisted``: it would be the agent's, but a person decided some of its steps at the
#   step-through prompt (overrode, skipped or did one by hand): what it achieved is not
#   the agent's alone, so it is counted beside the success rate, never in it.
# - ``hooked``: the same, with code in the person's place: a hook replaced the model's
#   action at some steps (``step.replace_action``). Code that overrides the model is
#   counted beside the rate as a person is, so that it cannot pass for the agent's work.
#
# - ``replayed``: a recorded program ran with no model call (``linewise replay``, a
#   replay cache); ``healed``: the same, with some steps chosen by the model where the
#   program did not fit the page. Neither is the agent's own result, so neither counts
#   in its success rate; each has its own success rate beside it.
#
# The outcome is derived from the termination, the infrastructure kind, whether a
# person assisted, whether a hook replaced actions and whether the episode replayed a
# program by ``outcome_of``; a new
# termination is classified by adding it to one of the sets below.

Outcome = Literal["agent", "assisted", "hooked", "replayed", "healed", "infrastructure",
                  "budget", "stopped"]

InfraKind = Literal[
    "model", "refused", "config", "browser", "server", "timeout", "task", "output", "crash",
]
"""What failed around the agent:

- ``model``: the model endpoint (unreachable, 429/5xx after the retry budget, a call
  timeout, an invalid body or no choices, a 400);
- ``refused``: the endpoint refused the key or does not know the model (the run stops);
- ``config``: the run's configuration cannot work with the endpoint (a prompt over the
  model's real context: ``--context-tokens`` says less than linewise assumed);
- ``browser``: Chromium, a renderer or a page load (``BrowserError``, Playwright errors);
- ``server``: a local server linewise runs (the embedded model, MiniWoB++);
- ``timeout``: a deadline of the runtime itself (the episode's wall-clock limit);
- ``task``: the task could not be set up as written;
- ``output``: the trace could not be written (the output folder is read-only or full;
  the run stops);
- ``crash``: an unexpected exception, i.e. a bug.
"""

AGENT_TERMINATIONS: frozenset[str] = frozenset(
    {"task_done", "agent_done", "infeasible", "max_steps"}
)
BUDGET_TERMINATIONS: frozenset[str] = frozenset({"budget"})
STOPPED_TERMINATIONS: frozenset[str] = frozenset({"interrupted", "user_stopped"})
# ``stalled``, ``browser_crash`` and ``renderer_crash`` are infrastructure of kind
# ``browser`` (the loop records them so).


FINAL_OUTCOMES: frozenset[str] = frozenset({"agent", "assisted", "hooked", "replayed",
                                            "healed", "budget"})
"""Endings that stand: running the episode again would not change what it says (a
bench's resume runs the others again)."""


def outcome_of(termination: str, infra_kind: InfraKind | None,
               assisted: bool = False, replay: ReplayMode | None = None,
               hooked: bool = False) -> Outcome:
    """The outcome of an ending (see the table above). An ``error`` or ``timeout`` with
    no infrastructure kind is the agent's (e.g. its answers never parsed), or
    ``assisted`` when a person decided some of its steps, or ``hooked`` when a hook's
    code replaced some of its actions (a person's help is named first: it is the one
    a person can answer for); ``replay`` says the episode replayed a program
    (``healed`` when the model chose some of its steps)."""
    if termination in BUDGET_TERMINATIONS:
        return "budget"
    if termination in STOPPED_TERMINATIONS:
        return "stopped"
    if termination == "timeout" or (termination not in AGENT_TERMINATIONS
                                    and infra_kind is not None):
        return "infrastructure"
    if assisted:
        return "assisted"
    if hooked:
        return "hooked"
    return replay if replay is not None else "agent"


class AttackVerdict(BaseModel):
    """The attack check of a task, judged once the episode is over."""

    kind: Literal["navigate", "typed", "answer"]
    succeeded: bool
    attempted: bool = Field(
        default=False,
        description="Whether the injected action was tried: for navigate also when the "
        "navigation policy refused the page load; for the other kinds, as succeeded.",
    )
    evidence: list[str] = Field(
        default_factory=list, description="Where the attack was seen (URLs, fields)."
    )


class EpisodeSummary(BaseModel):
    """The outcome of one episode; rewritten when it ends."""

    trace_version: int = TRACE_VERSION
    episode_id: str
    task_id: str
    goal: str = ""
    start_url: str = ""
    status: Literal["running", "finished", "failed", "stopped"] = "running"
    """``stopped``: the user or the runtime stopped the run, after a step (first Ctrl+C,
    SIGTERM, SIGHUP, ``q``) or at once (second Ctrl+C, their grace period over)."""
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
    filter_misses: int = Field(
        default=0, description="Bids the action used that the tree had and the filter hid."
    )
    action_errors: int = Field(default=0, description="Steps whose action failed.")
    parse_errors: int = Field(default=0, description="Steps whose answer held no usable "
                              "action.")
    assisted_steps: int = Field(
        default=0,
        description="Steps a person decided instead of the model (overrode, skipped or "
        "worked by hand): any makes the outcome 'assisted', never the agent's success.",
    )
    hook_steps: int = Field(
        default=0,
        description="Steps whose action a hook's code replaced (``hook_replaced``): any "
        "makes the outcome 'hooked', never the agent's success.",
    )
    skill_steps: int = Field(
        default=0, description="Steps a skill the model called ran (no model call).")
    repeats_escaped: int = Field(default=0, description="Steps with repeat_escape 'escaped'.")
    repeats_kept: int = Field(default=0, description="Steps with repeat_escape 'kept'.")
    blocked_navigations: int = Field(default=0, description="Page loads the policy refused.")
    refused_connections: int = Field(
        default=0, description="Other requests the policy refused (sub-resources, sockets, "
        "redirect hops): every one, listed in its step or not.")
    downloads_saved: int = 0
    downloads_refused: int = 0
    attack: AttackVerdict | None = Field(
        default=None,
        description="For a task with an attack check (prompt-injection suites): whether "
        "the page's injected instruction was carried out.",
    )
    replay: ReplaySummary | None = Field(
        default=None, description="Set when the episode replayed a recorded program.")
    task: dict[str, Any] | None = Field(
        default=None, description="The task as it was run (its task-file entry, secrets "
        "by variable name only): what ``linewise replay`` sets up again.")
    time: TimeTotals = Field(default_factory=TimeTotals)
    error: str | None = None
    infra_kind: InfraKind | None = Field(
        default=None, description="What failed around the agent, when something did."
    )
    traceback: str | None = None
    budget_stop: str | None = Field(
        default=None, description="Which limit ended the episode (termination 'budget')."
    )
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    directory: Path | None = Field(
        default=None, exclude=True,
        description="The episode's folder (steps.jsonl, screenshots/, this summary.json), "
        "set by the run and by read_summary; not written, since a folder may be moved.",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outcome(self) -> Outcome:
        """Whose ending this is: the agent's, assisted, hooked, a replay's, an
        infrastructure fault, a budget or a stop (``outcome_of``)."""
        return outcome_of(self.termination, self.infra_kind, self.assisted_steps > 0,
                          self.replay_mode, hooked=self.hook_steps > 0)

    @property
    def replay_mode(self) -> ReplayMode | None:
        """``replayed`` or ``healed`` for an episode that replayed a program, else None."""
        if self.replay is None:
            return None
        model_steps = self.replay.healed_steps or self.replay.fell_back_at is not None
        return "healed" if model_steps else "replayed"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def agent_success(self) -> bool | None:
        """Whether the agent succeeded on its own: ``success`` for an agent outcome;
        None for the rest, assisted and hooked ones included (``success`` may say the
        task got done, but not by the agent alone, so it is no result of the agent's)."""
        return self.success if self.outcome == "agent" else None

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
        self.action_errors += record.action_error is not None
        self.parse_errors += record.parse_error is not None
        self.assisted_steps += record.operator in ASSISTING_OPERATORS
        self.hook_steps += record.hook_replaced
        self.skill_steps += record.replay is not None and record.replay.skill is not None
        self.repeats_escaped += record.repeat_escape == "escaped"
        self.repeats_kept += record.repeat_escape == "kept"
        self.blocked_navigations += len(record.blocked)
        self.refused_connections += (sum(c.count for c in record.refused_connections)
                                     + record.refused_connections_more)
        self.downloads_saved += sum(d.saved_as is not None for d in record.downloads)
        self.downloads_refused += sum(d.refused is not None for d in record.downloads)
        self.time.filter_s += record.filter_result.latency_ms / 1000

    def mark_failed(
        self, termination: Termination, message: str, trace: str | None,
        infra_kind: InfraKind | None = None,
    ) -> None:
        """The episode ended in trouble: ``termination`` says which kind, ``infra_kind``
        what failed around the agent (``errors.infra_kind_of`` of the exception); a
        timeout is the runtime's deadline unless said otherwise."""
        self.status = "failed"
        self.termination = termination
        self.error = message
        self.traceback = trace
        self.success = False
        self.infra_kind = infra_kind or ("timeout" if termination == "timeout" else None)

    def mark_stopped(self, termination: Literal["interrupted", "user_stopped"],
                     message: str) -> None:
        """The user or the runtime stopped the episode before its end (Ctrl+C, SIGTERM,
        SIGHUP, ``q`` at the step-through prompt): after a step or at once, it is ``stopped``,
        neither the agent's failure nor a fault, and nothing is judged."""
        self.status = "stopped"
        self.termination = termination
        self.error = message

    def mark_ended(self, wall_s: float) -> None:
        """Stamp the end; an episode still "running" here was cut short from outside
        (an exception that is no error, such as KeyboardInterrupt): it was stopped."""
        self.time.wall_s = wall_s
        self.finished_at = utcnow()
        if self.status == "running":
            self.mark_stopped("interrupted", self.error or "episode was interrupted")
