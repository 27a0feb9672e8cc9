"""State-graph construction with an LLM extractor (paper section 3.3, Appendix B.2).

Phase 1 turns every step's (thought, action) into an action node {type, goal}; the steps
are independent, so they are asked concurrently. Phase 2 walks the steps in order with
the workspace (the information nodes so far): it decomposes each page the agent saw into
atomic information nodes, matched against the workspace (edge producer -> information),
and links the next action to the information it relied on (information -> action).

Browser adaptation: the page of step k is the result of action k-1, so the producer of
step k's information is A_k (node ids are 1-based: step k's action is A_{k+1}); the start
page's information hangs under I0, the goal, as the paper's o0 = q does. The action type
is read from the recorded action when it parses (the LLM's type is only a fallback).

A piece the model calls new may still be a repeat of a workspace entry or the agent's
intention restated (``workspace.py`` says how each is recognised); a piece that copies
the prompt's own lines is dropped. Each is counted in ``ExtractorUsage``.

Every answer is a JSON object validated by pydantic and by the workspace (ids must
exist, an action must rely on something); an invalid answer is asked again with the
error fed back, ``retries`` times, after which ``GraphBuildError`` reports the step.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel, ValidationError

from linewise.agent.action_parser import parse_action
from linewise.agent.models import ChatModel
from linewise.agent.structured import Constraint, ask_structured
from linewise.apps.pruning.answers import (
    ACTION_SCHEMA,
    ACTION_TYPES,
    ActionNodeAnswer,
    InfoAnswer,
    info_schema,
)
from linewise.apps.pruning.graph import GraphNode, StateGraph
from linewise.apps.pruning.trajectory import Trajectory, TrajectoryStep
from linewise.apps.pruning.workspace import Intentions, PageHistory, Workspace, clip
from linewise.errors import (
    ActionParseError,
    EndpointUnreachable,
    GraphBuildError,
    ResponseFormatError,
)
from linewise.prompts import render_prompt
from linewise.tokens import count_tokens, get_encoding

log = structlog.get_logger(__name__)

Answer = TypeVar("Answer", bound=BaseModel)


@dataclass
class ExtractorConfig:
    temperature: float = 0.7
    retries: int = 2
    max_obs_tokens: int = 3000
    max_units: int = 12
    max_tokens: int = 1024
    json_schema: bool = True
    """Ask for ``response_format: json_schema`` (grammar-constrained on llama.cpp); turned
    off for the model when its endpoint refuses it with a 400 (``agent.structured``)."""


@dataclass
class ExtractorUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    text_matches: int = 0
    """Pieces the model left new (``same_as`` null) that repeat a workspace entry in its
    words, or name it, and were merged into it."""
    intent_matches: int = 0
    """Pieces the model left new that restate the agent's intention (an action goal, a
    plan): taken as I0, the goal they come from."""
    traced_back: int = 0
    """New pieces first mentioned on a later page than the one that first showed them:
    produced by the action before that earlier page (see ``PageHistory``)."""
    prompt_copies: int = 0
    """Pieces dropped because they copy the prompt's own lines (``"A2: click('44')"``,
    ``"Thought: …"``, a section heading): the agent's action, not what the page gave."""


class GraphExtractor:
    """Builds one state graph per call of ``build``; safe to use concurrently."""

    def __init__(self, client: ChatModel, config: ExtractorConfig | None = None) -> None:
        self.client = client
        self.config = config or ExtractorConfig()
        self.usage = ExtractorUsage()

    async def build(self, trajectory: Trajectory) -> StateGraph:
        """The state graph of ``trajectory``; ``GraphBuildError`` if it cannot be built."""
        answers = await asyncio.gather(*(
            self._action_node(trajectory, position) for position in range(len(trajectory.steps))
        ))
        space = Workspace()
        space.add_info(trajectory.goal)
        actions: list[GraphNode] = []
        for position, (step, answer) in enumerate(zip(trajectory.steps, answers, strict=True)):
            actions.append(GraphNode(
                id=f"A{position + 1}", kind="action", step=step.index,
                type=action_type(step.action) or answer.type, goal=answer.goal,
                action=step.action or "",
            ))
        intentions = Intentions()
        for answer in answers:
            intentions.add_goal(answer.goal)
        pages = PageHistory([step.observation for step in trajectory.steps])
        space.link("I0", "A1")
        for position, step in enumerate(trajectory.steps):
            await self._information(trajectory, position, step, actions, space, intentions,
                                    pages)
        # Node order is trajectory order (I0, the start page, A1, what A1 revealed, A2, …):
        # the miner breaks ties between equally short paths in favour of earlier nodes.
        ordered = [space.nodes[0], *space.first_seen.get(0, [])]
        for position, action in enumerate(actions):
            ordered += [action, *space.first_seen.get(position + 1, [])]
        try:
            return StateGraph(
                nodes=ordered, edges=list(space.edges), source="I0", sink=actions[-1].id,
                task_id=trajectory.task_id, episode=trajectory.episode, goal=trajectory.goal,
            )
        except ValidationError as exc:  # a bug here, not the model's fault: say so plainly
            raise GraphBuildError(f"{trajectory.key}: built an invalid graph: {exc}") from exc

    # ------------------------------------------------------------------ phase 1

    async def _action_node(self, trajectory: Trajectory, position: int) -> ActionNodeAnswer:
        step = trajectory.steps[position]
        history = "\n".join(
            f"Step {s.index}: thought: {clip(s.think or '', 300)} | action: {s.action}"
            for s in trajectory.steps[max(0, position - 8):position]
        ) or "(none: this is the first step)"
        prompt = render_prompt(
            "prune_action_nodes.md", goal=trajectory.goal, history=history, step=step.index,
            thought=clip(step.think or "(none)", 1500), action=step.action or "(none)",
            action_types=", ".join(ACTION_TYPES),
        )
        return await self._ask(prompt, "action_node", ACTION_SCHEMA, ActionNodeAnswer,
                               lambda answer: None, f"{trajectory.key} step {step.index}")

    # ------------------------------------------------------------------ phase 2

    async def _information(
        self,
        trajectory: Trajectory,
        position: int,
        step: TrajectoryStep,
        actions: list[GraphNode],
        space: Workspace,
        intentions: Intentions,
        pages: PageHistory,
    ) -> None:
        producer = "I0" if position == 0 else actions[position - 1].id
        nxt = actions[position]
        if position == 0:
            producer_text = "Nothing: this is the start page, opened for the goal (I0)."
        else:
            previous = actions[position - 1].model_extra or {}
            producer_text = (f"{producer}: {previous['type']} — {previous['goal']} "
                             f"(action {previous['action']})")
        known = set(space.info)

        def check(answer: InfoAnswer) -> None:
            for unit in answer.information:
                if unit.same_as is not None and unit.same_as not in known:
                    raise ValueError(f"same_as {unit.same_as!r} is not a workspace id; use "
                                     f"one of {', '.join(sorted(known))} or null")
            unknown = [i for i in answer.next_relies_on if i not in known]
            if unknown:
                raise ValueError(f"next_relies_on names {', '.join(unknown)}, which are not "
                                 f"workspace ids ({', '.join(sorted(known))})")
            if not answer.next_relies_on and not any(u.used_by_next
                                                     for u in answer.information):
                raise ValueError("the next action relies on nothing; mark the pieces it "
                                 "uses with used_by_next, or list ids (I0 is the goal) in "
                                 "next_relies_on")

        prompt = render_prompt(
            "prune_info_nodes.md", goal=trajectory.goal, workspace=space.render(),
            producer=producer_text, page=self._page(step), next_id=nxt.id,
            next_type=(nxt.model_extra or {})["type"], next_goal=(nxt.model_extra or {})["goal"],
            next_thought=clip(step.think or "(none)", 1000), next_action=step.action or "(none)",
            max_units=self.config.max_units,
        )
        answer = await self._ask(prompt, "information",
                                 info_schema(sorted(known), self.config.max_units), InfoAnswer,
                                 check, f"{trajectory.key} step {step.index}")
        self.usage.prompt_copies += answer.prompt_copies
        units = answer.information
        if len(units) > self.config.max_units:  # keep what the next action used, in order
            ranked = sorted(range(len(units)), key=lambda i: not units[i].used_by_next)
            chosen = set(ranked[: self.config.max_units])
            units = [unit for i, unit in enumerate(units) if i in chosen]
        for unit in units:
            node_id = unit.same_as
            if node_id is None:
                node_id = space.match(unit.text)
                if node_id is not None:
                    self.usage.text_matches += 1
            if node_id is None and intentions.restated_by(unit.text):
                node_id = space.source
                self.usage.intent_matches += 1
            if node_id is None:  # new: produced by whatever made it appear on the page
                origin = pages.first_shown(unit.text, position)
                self.usage.traced_back += origin < position
                node_id = space.add_info(unit.text.strip(), origin,
                                         trajectory.steps[origin].index)
                space.link("I0" if origin == 0 else actions[origin - 1].id, node_id)
            space.link(producer, node_id)
            if unit.used_by_next:
                space.link(node_id, nxt.id)
        for node_id in answer.next_relies_on:
            space.link(node_id, nxt.id)

    def _page(self, step: TrajectoryStep) -> str:
        error = f"Error of the previous action: {step.last_action_error}\n" \
            if step.last_action_error else ""
        page = clip_tokens(step.observation, self.config.max_obs_tokens)
        return f"URL: {step.url}\n{error}{page}"

    # ------------------------------------------------------------------ asking

    async def _ask(
        self,
        prompt: str,
        schema_name: str,
        schema: dict[str, Any],
        model: type[Answer],
        check: Callable[[Answer], None],
        where: str,
    ) -> Answer:
        """One validated JSON answer, re-asking with the error fed back."""

        def read(text: str) -> Answer:
            try:
                answer = model.model_validate(parse_json_object(text))
                check(answer)
            except (ValueError, ValidationError) as exc:
                log.info("extractor answer rejected", where=where, error=_describe(exc))
                raise ResponseFormatError(_describe(exc)) from exc
            return answer

        result = await ask_structured(
            self.client, lambda _constrained: [{"role": "user", "content": prompt}], read,
            constraint=Constraint.json_schema(schema_name, schema),
            mode="auto" if self.config.json_schema else "off",
            reask=lambda error, _text: {"role": "user", "content": render_prompt(
                "prune_retry.md", error=error)},
            retries=self.config.retries, purpose="other",
            temperature=self.config.temperature, max_tokens=self.config.max_tokens,
        )
        answered = [call for call in result.calls if call.error is None]
        self.usage.calls += len(answered)
        self.usage.prompt_tokens += sum(call.prompt_tokens for call in answered)
        self.usage.completion_tokens += sum(call.completion_tokens for call in answered)
        self.usage.retries += len(answered) - (result.value is not None)
        if isinstance(result.failure, EndpointUnreachable):
            raise result.failure
        if result.failure is not None:
            raise GraphBuildError(
                f"{where}: the extractor call failed: {result.failure}") from result.failure
        if result.value is None:
            raise GraphBuildError(
                f"{where}: no valid {schema_name} answer after {self.config.retries + 1} "
                f"attempts; last error: {result.error}"
            )
        return result.value


def action_type(action: str | None) -> str | None:
    """The function name of a recorded action, or None if it does not parse."""
    if not action:
        return None
    try:
        return parse_action(action).name
    except ActionParseError:
        return None


def parse_json_object(text: str) -> Any:
    """The JSON object in an answer, tolerating code fences and words around it."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("the answer holds no JSON object")
    try:
        return json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not valid JSON: {exc}") from exc


def clip_tokens(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` tokens, with a marker saying how much was cut."""
    if count_tokens(text) <= limit:
        return text
    encoding = get_encoding()
    tokens = encoding.encode_ordinary(text)
    kept = encoding.decode(tokens[:limit])
    return f"{kept}\n[… {len(tokens) - limit} more tokens of the page not shown]"


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'answer'}: {err['msg']}"
            for err in exc.errors()
        )
    return str(exc)
