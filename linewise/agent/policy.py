"""The action policy: one LLM decision per step, re-asked when the answer is malformed
or when it would repeat an action that changed nothing on the page as it is. What the
policy is shown of the page, it makes itself from the observation (``page_view``)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Literal

import structlog
from pydantic import BaseModel, Field

from linewise.agent import page_view
from linewise.agent.action_grammar import action_grammar
from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import ActionSet
from linewise.agent.answer_check import answer_from_reasoning, applies
from linewise.agent.filters.base import FilterInput, FilterResult, ObservationFilter
from linewise.agent.history import PastStep
from linewise.agent.models import ChatModel
from linewise.agent.profile import profile_of
from linewise.agent.prompt import (
    PageView,
    build_action_messages,
    cycle_repeat_message,
    futile_repeat_message,
    retry_message,
)
from linewise.agent.prompt_fit import PromptLimits, fit_view
from linewise.agent.repeats import Repeat, find_repeat, futile_calls, is_futile
from linewise.agent.response import AgentAnswer, parse_answer
from linewise.agent.structured import Constraint, ask_structured, supports
from linewise.agent.targets import inert_bids, leads_to, offered_targets, pointer_targets
from linewise.axtree import AXLine
from linewise.errors import ResponseFormatError
from linewise.records import ActionDecoding, AnswerCheckRecord, LLMCall, MemoryShown, RepeatEscape
from linewise.settings import AgentSettings
from linewise.tokens import count_message_tokens

if TYPE_CHECKING:
    from linewise.agent.experience.retrieve import ExperienceMemory

log = structlog.get_logger(__name__)

SpendCheck = Callable[[list[LLMCall]], "str | None"]
"""Given the calls a step has made so far, why it may make no more (a spending limit),
or None."""


class Decision(BaseModel):
    """The outcome of one step's deliberation."""

    think: str | None = None
    action: ParsedAction | None = None
    action_text: str | None = None
    error: str | None = Field(
        default=None, description="Why no valid action came out, after all retries."
    )
    calls: list[LLMCall] = Field(default_factory=list)
    page_key: str = Field(default="", description="The page the decision was made on.")
    url: str = Field(default="", description="Its URL, fragment included.")
    target: AXLine | None = Field(
        default=None, description="The line of the element the action named first, in the "
        "view it was chosen on.")
    repeat_escape: RepeatEscape | None = Field(
        default=None,
        description="Set when the first answer repeated an action that had changed nothing: "
        "'escaped' if a re-ask gave another action, 'kept' if every re-ask repeated it.",
    )
    decoding: ActionDecoding = Field(
        default="free", description="How the answer was decoded (``records.ActionDecoding``)."
    )
    reasks_stopped: str | None = Field(
        default=None, description="Why a re-ask was not made: the spending limit it met."
    )
    answer_check: AnswerCheckRecord | None = Field(
        default=None, description="Set when the reasoning was checked for the answer."
    )


class ActionAgent:
    """A GenericAgent-style policy: goal, page, history and action space in; one action out.

    A malformed answer (no ``<action>`` block, a call that does not parse, a wrong
    argument) is shown back to the model, which is asked again up to ``parse_retries``
    times. The conversation of retries stays within the step. Every re-ask samples at
    ``reask_temperature``: at temperature 0 a model given the same prompt plus an error
    tends to write the same answer again, word for word (docs/design.md, "Re-asks").

    A *futile repeat* is an answer that repeats an action made since the page last changed
    (same URL, same AXTree: ``PageView.page_key``; ``agent.repeats``), whether it ran or
    failed. Small models at temperature 0 fall into such loops and answer the
    same thing until the step limit. The model is then told so and asked again, up to
    ``repeat_escapes`` times; the first different valid action is taken. If every re-ask
    repeats the action, it runs as first answered: some repeats are right (a button that
    only reacts late, an element that was not visible yet).

    A re-ask shows the model its latest answer and what was wrong with it, not every
    earlier one: the conversation of a step stays within one answer and one re-ask of
    the first prompt, which ``view_room`` leaves room for. Re-asks spend tokens like any
    call: ``decide``'s ``spend_check`` is asked before each, so a spending limit holds
    within a step too.

    Where the model decodes under a grammar (``settings.action_grammar``; ``auto``: the
    model's profile decides), every call carries ``action_grammar``'s GBNF over the
    view's bids, in the request field the profile names: the answer is one valid call
    by construction, and re-asks for form are not needed. An endpoint that refuses the
    grammar (HTTP 400) is asked again without it, for as long as its client lives.
    """

    def __init__(
        self,
        model: ChatModel,
        settings: AgentSettings | None = None,
        *,
        action_names: Collection[str] | None = None,
    ) -> None:
        self.model = model
        self.settings = settings or AgentSettings()
        self.parse_retries = self.settings.parse_retries
        self.repeat_escapes = self.settings.repeat_escapes
        self.reask_temperature = self.settings.reask_temperature
        self.action_names = action_names
        self.profile = profile_of(model)
        """What the model takes and needs (``agent.profile``): every ``auto`` reads it."""
        self.grammar_on = _chosen(self.settings.action_grammar, self.profile.grammar_by_default)
        self.past_thoughts = _chosen(self.settings.past_thoughts, self.profile.past_thoughts)
        self.history: list[PastStep] = []
        self.examples = ""
        """The memory's worked examples for this episode (``agent/experience``), shown
        in every step's prompt."""
        self.limits = PromptLimits(context_tokens=self.profile.context_tokens,
                                   answer_tokens=self.profile.answer_tokens)

    async def recall(self, memory: ExperienceMemory, task_id: str, goal: str,
                     page: page_view.Page) -> MemoryShown | None:
        """Take the memory's worked examples for this episode, from its first page: the
        same examples in every prompt keep the prompt's prefix (and the server's cache
        of it) unchanged. Returns what was shown, for the trace."""
        examples = await memory.examples(task_id, goal, page.text)
        self.examples = examples.text
        return examples.shown

    def look_at(self, goal: str, page: page_view.Page, *, last_error: str | None,
                failed_bid: str | None = None) -> tuple[FilterInput, PageView]:
        """The filter's input for this page (``page_view.filter_input``: the history's
        elements kept in view) and the view the prompt will show, its text still to come
        from the filter (``show``)."""
        return (page_view.filter_input(goal, page, self.history, last_error=last_error,
                                       failed_bid=failed_bid),
                page_view.blank_view(page, last_error))

    async def filter_view(self, goal: str, view: PageView, observation: FilterInput,
                          observation_filter: ObservationFilter) -> FilterResult:
        """The filter's view of the page, cut to the room this step's prompt leaves it
        (``view_room``; ``prompt_fit.fit_view``)."""
        return fit_view(observation, await observation_filter.apply(observation),
                        self.view_room(goal, view))

    def show(self, view: PageView, page: page_view.Page, filtered: FilterResult) -> PageView:
        """``view`` completed from what the filter showed (``page_view.show``)."""
        return page_view.show(view, page, filtered, self.history)

    def view_room(self, goal: str, view: PageView) -> int:
        """The tokens the page may take in this step's prompt (``prompt_fit``): the
        model's context less the rest of the prompt, the answer and one re-ask."""
        empty = view.model_copy(update={"text": ""})
        others = count_message_tokens(
            build_action_messages(goal, empty, self.history, self.action_names, self.examples,
                                  past_thoughts=self.past_thoughts),
            self.profile.tokenizer)
        return self.limits.view_room(others)

    async def decide(
        self, goal: str, view: PageView, spend_check: SpendCheck | None = None
    ) -> Decision:
        """One step's action. ``spend_check`` is asked before every re-ask."""
        if self.history and view.elements is not None:
            # the page as it is now says what the last step did to the element it named
            last = self.history[-1]
            if last.parsed is not None and last.parsed.bids:
                last.target_after = view.elements.get(last.parsed.bids[0])
        messages = build_action_messages(goal, view, self.history, self.action_names,
                                         self.examples, past_thoughts=self.past_thoughts)
        decision = Decision(page_key=view.page_key, url=view.url)
        # Once the endpoint refused a grammar (remembered per client), none is built.
        grammar = (self._grammar(goal, view) if self.grammar_on and supports(self.model, "grammar")
                   else None)
        asking = _Asking(decision, grammar, spend_check)
        await self._ask(asking, messages)
        if self.repeat_escapes and (
                repeat := find_repeat(decision.action, self.history, decision.page_key)):
            await self._escape_repeat(goal, asking, messages, view, repeat)
        if self._may_answer_from_reasoning(goal, decision):
            await self._answer_from_reasoning(goal, view, asking)
        if decision.action is not None and decision.action.bids and view.elements is not None:
            decision.target = view.elements.get(decision.action.bids[0])
        return decision

    async def _answer(
        self, asking: _Asking, messages: list[dict[str, str]], *, retries: int,
        **sampling: Any,
    ) -> AgentAnswer | None:
        """One structured ask of this step (``agent.structured``): under the grammar
        while the endpoint takes it, re-asked ``retries`` times with the latest problem
        shown. None when the spending limit forbade its first call."""
        decision = asking.decision
        check = asking.spend_check
        if decision.calls and check is not None and (reason := check(decision.calls)):
            log.info("re-ask not made", reason=reason)
            decision.reasks_stopped = reason
            return None
        result = await ask_structured(
            self.model, lambda _constrained: messages, _valid_answer(self.action_names),
            constraint=asking.grammar, purpose="action", retries=retries, history="last",
            reask=lambda error, _text: retry_message(error),
            reask_params={"temperature": self.reask_temperature},
            may_reask=(lambda calls: check([*decision.calls, *calls])) if check else None,
            first_attempt=len(decision.calls), **sampling,
        )
        decision.calls.extend(result.calls)
        decision.reasks_stopped = decision.reasks_stopped or result.stopped
        if result.refused:
            decision.decoding = "refused"
        elif result.constrained and decision.decoding == "free":
            decision.decoding = "grammar"
        if result.failure is not None:
            raise result.failure
        if result.value is not None:
            return result.value
        if result.last_text is None:
            return None
        return parse_answer(result.last_text, self.action_names)
    def _may_answer_from_reasoning(self, goal: str, decision: Decision) -> bool:
        # giving up is checked too: the model misreads a question as a task it cannot do
        # ("the goal cannot be achieved because the weakref proxy's target no longer
        # exists") while its reasoning names the answer
        return (decision.action is not None and decision.action.name != "send_msg_to_user"
                and bool(decision.think and decision.think.strip())
                and applies(self.settings.answer_check, goal,
                            by_default=self.profile.answer_check)
                and (self.action_names is None or "send_msg_to_user" in self.action_names))

    async def _answer_from_reasoning(self, goal: str, view: PageView, asking: _Asking) -> None:
        decision = asking.decision
        check = asking.spend_check
        if check is not None and (reason := check(decision.calls)):
            decision.reasks_stopped = decision.reasks_stopped or reason
            return
        assert decision.action is not None and decision.think is not None
        found = await answer_from_reasoning(self.model, goal, decision.think, view.text)
        decision.calls.extend(found.calls)
        decision.answer_check = AnswerCheckRecord(
            replaced=decision.action_text or str(decision.action), answer=found.answer,
            rejected=found.rejected)
        if found.answer is not None:
            log.info("answered from the reasoning", answer=found.answer,
                     instead_of=str(decision.action))
            decision.action = ParsedAction(name="send_msg_to_user",
                                           arguments={"text": found.answer})
            decision.action_text = str(decision.action)

    async def _escape_repeat(
        self, goal: str, asking: _Asking, messages: list[dict[str, str]], view: PageView,
        repeat: Repeat,
    ) -> None:
        """Ask again, told that the answer changed nothing when it was made on this page,
        or that it goes round a loop back to this page. Under a grammar the re-ask's
        grammar forbids what the repeat names (``Repeat.forbidden``): being told does
        not stop a model from writing the same call again at temperature, or from
        pointing at the same element another way (``focus`` for ``click``). A link to
        the address the page is already at is not forbidden: the model that clicks it
        again takes the page for where it should be, and made to choose another it
        leaves that page for the next link it sees; told, it may keep it."""
        decision = asking.decision
        assert decision.action is not None
        repeated = decision.action
        forbidden = repeat.forbidden
        leads_here = leads_to(repeated.bids, view.elements, view.url)
        log.info("futile repeat", action=str(repeated), made=[str(c) for c in repeat.made],
                 cycle=repeat.is_cycle, leads_here=leads_here)
        if asking.grammar is not None and not leads_here:
            asking = _Asking(decision, self._grammar(goal, view, forbidden),
                             asking.spend_check)
        narrowed = asking.grammar is not None and not leads_here
        if repeat.is_cycle:
            told = cycle_repeat_message(str(repeated))
        else:
            error = next((step.error for step in reversed(self.history)
                          if step.parsed is not None and is_futile(repeated, [step.parsed])),
                         None)
            told = futile_repeat_message(
                str(repeated), [str(c) for c in repeat.made], error,
                can_report=self._can_end(), leads_here=leads_here)
        messages = [
            *messages,
            {"role": "assistant", "content": decision.calls[-1].response or ""},
            told,
        ]  # every re-ask repeats this one: the model's own re-answers are not added
        decision.repeat_escape = "kept"
        for attempt in range(self.repeat_escapes):
            # Under a grammar that forbids the repeat the first re-ask is greedy: the
            # repeat cannot be written, and sampling at the re-ask temperature draws the
            # grammar's unlikely corners (a middle click, clearing a field just filled).
            sampling = ({} if attempt == 0 and narrowed
                        else {"temperature": self.reask_temperature})
            answer = await self._answer(asking, messages, retries=0, **sampling)
            if answer is None:
                return
            if answer.action is not None and not is_futile(answer.action, forbidden):
                decision.think, decision.action_text = answer.think, answer.action_text
                decision.action = answer.action
                decision.repeat_escape = "escaped"
                return
            log.info("repeat not escaped", attempt=attempt, answer=answer.action_text)
            if leads_here and asking.grammar is not None and self._can_end():
                # A model told that its link leads where the page already is may click
                # it again until the step limit, though it says it has arrived: the last
                # re-asks may only end the episode, with an answer or a reason it cannot.
                ending = ActionSet.of(self.action_names).ending_names
                asking = _Asking(decision, Constraint.gbnf(
                    "action", action_grammar(view.elements, ending)), asking.spend_check)

    def _can_end(self) -> bool:
        """Whether the agent ends the episode itself (``send_msg_to_user`` is offered)."""
        return self.action_names is None or "send_msg_to_user" in self.action_names

    def _grammar(self, goal: str, view: PageView,
                 forbid: list[ParsedAction] | None = None) -> Constraint:
        """The action grammar over the view's elements, less ``forbid``. Once a pointer
        action on this unchanged page named an element that answers no click, pointer
        actions may name only what the prompt lists (``targets.offered_targets``): the
        links the goal names and those that open the entry the last one pointed into
        (among all the view's links, a model tends to take the one whose id begins like
        the element's, a neighbour), else the clickable elements closest to the goal,
        else any clickable one."""
        pointer_bids: list[str] | None = None
        if view.elements is not None and inert_bids(
                futile_calls(self.history, view.page_key), view.elements, view.clickable):
            pointer_bids = (offered_targets(goal, view.elements, view.clickable,
                                            view.entry_links, view.url)
                            or pointer_targets(view.elements, view.clickable))
        elements = (view.elements if view.elements is None or not view.entry_links
                    else {**view.elements, **view.entry_links})
        skills = {offer.name: offer.parameters for offer in view.skills}
        try:
            grammar = action_grammar(elements, self.action_names, forbid=forbid or (),
                                     pointer_bids=pointer_bids, skills=skills)
        except ValueError:  # the forbidden calls were the only ones left: keep the full grammar
            grammar = action_grammar(elements, self.action_names, skills=skills)
        return Constraint.gbnf("action", grammar)

    async def _ask(self, asking: _Asking, messages: list[dict[str, str]]) -> None:
        """Ask until the answer holds one valid action, or ``parse_retries`` run out."""
        decision = asking.decision
        answer = await self._answer(asking, messages, retries=self.parse_retries)
        if answer is None:
            return
        decision.think, decision.action_text = answer.think, answer.action_text
        decision.action, decision.error = answer.action, answer.error

    def remember(self, decision: Decision, action_error: str | None) -> None:
        """Add the step to the history the next prompt shows."""
        self.history.append(
            PastStep(
                think=decision.think,
                action=str(decision.action) if decision.action else decision.action_text,
                parsed=decision.action,
                error=action_error or decision.error,
                page_key=decision.page_key,
                url=decision.url,
                target=decision.target,
            )
        )


class _Asking:
    """One step's asking: its decision so far, its grammar and its spending check."""

    def __init__(
        self, decision: Decision, grammar: Constraint | None, spend_check: SpendCheck | None
    ) -> None:
        self.decision = decision
        self.grammar = grammar
        self.spend_check = spend_check


def _valid_answer(action_names: Collection[str] | None) -> Callable[[str], AgentAnswer]:
    """``read`` for ``ask_structured``: an answer holding one valid action."""
    def read(text: str) -> AgentAnswer:
        answer = parse_answer(text, action_names)
        if answer.action is None:
            raise ResponseFormatError(answer.error or "unreadable answer")
        return answer
    return read


def _chosen(mode: Literal["auto", "on", "off"], by_default: bool) -> bool:
    """An ``auto``/``on``/``off`` setting: ``auto`` is the profile's default."""
    return by_default if mode == "auto" else mode == "on"
