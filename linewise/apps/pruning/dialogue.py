"""The agent's own prompt and answer format for a (pruned) trajectory.

A pruned trajectory is only useful as training data if each kept step looks exactly as
it would have looked had the agent taken the short path: the action prompt of
agent/prompt.py (goal, page, history of the *kept* steps) and an answer in the agent's
``<think>…</think><action>…</action>`` format. The same messages condition the perplexity
of a rewritten thought, so the base model is asked about the very context it will be
trained on.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from linewise.agent.history import PastStep
from linewise.agent.prompt import PageView, build_action_messages
from linewise.apps.pruning.trajectory import TrajectoryStep


class PrunedStep(BaseModel):
    """One kept step, with its final thought and how that thought was chosen."""

    index: int = Field(description="The step's index in the original episode.")
    think: str | None
    action: str | None
    original_think: str | None = None
    rewritten: bool = False
    selection: str = Field(default="kept",
                           description="kept | perplexity | first candidate: <why> | original: "
                           "<why>")
    candidates: list[dict[str, object]] = Field(default_factory=list,
                                                description="[{text, perplexity}]")


def page_view(step: TrajectoryStep, follows_its_predecessor: bool) -> PageView:
    """The page as step ``step`` saw it. The previous action's error is shown only when
    that action is still the previous one: after pruning it would name a step that is
    gone."""
    return PageView(
        url=step.url,
        tabs=step.tabs,
        focused_bid=step.focused_bid,
        text=step.observation,
        last_action_error=step.last_action_error if follows_its_predecessor else None,
    )


def memories(steps: list[PrunedStep], originals: dict[int, TrajectoryStep]) -> list[PastStep]:
    return [PastStep(think=s.think, action=s.action, error=originals[s.index].action_error)
            for s in steps]


def step_messages(
    goal: str,
    step: TrajectoryStep,
    before: list[PrunedStep],
    originals: dict[int, TrajectoryStep],
) -> list[dict[str, str]]:
    """System and user messages the agent would get at ``step`` after the kept ``before``."""
    follows = (before[-1].index == step.index - 1) if before else step.index == 0
    return build_action_messages(goal, page_view(step, follows), memories(before, originals))


def answer_text(think: str | None, action: str | None) -> str:
    """An answer in the agent's format (agent/response.py parses it back)."""
    thought = f"<think>{think}</think>" if think else ""
    return f"{thought}<action>{action or ''}</action>"


def training_messages(
    goal: str, kept: list[PrunedStep], originals: dict[int, TrajectoryStep]
) -> list[dict[str, str]]:
    """One chat: the system prompt, then per kept step its user prompt and the answer."""
    messages: list[dict[str, str]] = []
    for position, step in enumerate(kept):
        system, user = step_messages(goal, originals[step.index], kept[:position], originals)
        if not messages:
            messages.append(system)
        messages += [user, {"role": "assistant", "content": answer_text(step.think,
                                                                          step.action)}]
    return messages
