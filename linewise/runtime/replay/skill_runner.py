"""Running skills inside an agent's episode: what is offered, who starts one, and its
steps until it ends (``runtime/episode.py`` holds one ``SkillRunner`` per episode).

A skill is offered where the goal fits its template and its precondition holds
(``SkillLibrary.offered``); it starts when the action model calls ``run_skill``, or, with
``agent.skill_start`` goal, at the episode's first step when the goal fits one (the
template is the check that the skill is the task's own). Its steps then replay with no
model call (``ReplayDriver`` without healing) until the skill ends or a step does not
fit; the next prompt then says which, and the model goes on.
"""

from __future__ import annotations

from typing import Literal

import structlog

from linewise.agent.action_parser import ParsedAction
from linewise.agent.policy import Decision
from linewise.agent.prompt import PageView, SkillOffer
from linewise.errors import ProgramError
from linewise.runtime.browser.observation import Observation
from linewise.runtime.replay.driver import ReplayDriver, ReplayPlan
from linewise.runtime.replay.skill import Skill, SkillLibrary, parse_skill_call

log = structlog.get_logger(__name__)


class SkillRunner:
    """The skills of one episode: offers, the goal's start, the skill running."""

    def __init__(self, library: SkillLibrary, start: Literal["goal", "model"]) -> None:
        self.library = library
        self.start = start
        self.running: tuple[Skill, ReplayDriver] | None = None
        self.note = ""
        """What the next prompt says of the skill that just ended (read once)."""
        self._goal_tried = False

    @property
    def driver(self) -> ReplayDriver | None:
        return self.running[1] if self.running is not None else None

    def offers(self, goal: str, lines: list[str]) -> list[SkillOffer]:
        """The skills offered on this page, each with the arguments the goal gives."""
        return [SkillOffer(name=skill.name, parameters=[p.name for p in skill.parameters],
                           doc=skill.doc, arguments=skill.arguments_from(goal))
                for skill in self.library.offered(goal, lines)]

    def take_note(self) -> str:
        note, self.note = self.note, ""
        return note

    def goal_decision(self, view: PageView, first_step: bool) -> Decision | None:
        """At the first step, the call of the skill the goal fits (``skill_start`` goal),
        made without asking the model; once per episode."""
        if self.start != "goal" or not first_step or self._goal_tried:
            return None
        self._goal_tried = True
        fitting = [offer for offer in view.skills if offer.arguments is not None]
        if not fitting:
            return None
        offer = fitting[0]
        action = ParsedAction(name="run_skill", arguments={
            "name": offer.name, "arguments": offer.arguments})
        return Decision(think=f"The goal fits the skill {offer.name}'s template.",
                        action=action, action_text=str(action), page_key=view.page_key,
                        url=view.url)

    def begin(self, call: ParsedAction, obs: Observation, *, by_model: bool
              ) -> ReplayPlan | str:
        """Start the called skill: its first step's plan on this page, or why it cannot
        start (what the model is told)."""
        name, arguments = parse_skill_call(call)
        skill = self.library.skills.get(name)
        if skill is None:
            return f"There is no skill {name!r} (skills: {', '.join(sorted(self.library.skills))})."
        try:
            program = skill.bind(arguments)
        except ProgramError as exc:
            return str(exc)
        driver = ReplayDriver(program, heal=False)
        driver.begin(obs.url)
        first = driver.plan(obs)
        if first.decision is None or first.record is None:
            return (f"The skill {name} cannot start on this page: "
                    f"{driver.summary.detail or 'its first element is not here'}.")
        first.record.skill = name
        first.record.skill_start = "model" if by_model else "goal"
        self.running = (skill, driver)
        log.info("skill started", skill=name, arguments=arguments)
        return first

    def next_step(self, obs: Observation) -> ReplayPlan | None:
        """The running skill's next step, or None when it ended (``note`` says how)."""
        if self.running is None:
            return None
        skill, driver = self.running
        plan = driver.plan(obs)
        if plan.decision is not None and plan.record is not None:
            plan.record.skill = skill.name
            return plan
        self.running = None
        ran = driver.summary.replayed_steps
        if driver.summary.divergence == "program_ended":
            self.note = f"\n# Skill\nThe skill {skill.name} ran all its {ran} steps.\n"
        else:
            self.note = (f"\n# Skill\nThe skill {skill.name} stopped after {ran} of its "
                         f"{len(skill.steps)} steps: {driver.summary.detail}. Go on from "
                         "the page as it is.\n")
        log.info("skill ended", skill=skill.name, steps=ran,
                 reason=driver.summary.divergence)
        return None

    def ran(self, plan: ReplayPlan, error: str | None) -> None:
        if self.running is not None:
            self.running[1].ran(plan, error)
