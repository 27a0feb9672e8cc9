"""Replaying a program step by step, with no model unless a step must be healed.

The step loop (``runtime/episode.py``) asks the driver, after each observation, what to
do: run the program's next action on the elements its locators find on this page (no
model call), hand the step to the action model told what the recorded step meant to do
(healing), or stop (a divergence with healing off, or after it failed).

Rules, and why:

- A recorded action runs only on elements its locators find *uniquely*
  (``locators.resolve``); a locator that finds none, several or an element of another
  role is a divergence, never a guess: acting on the wrong element would pass silently.
- After a replayed action, the next observation is checked for the effect the recording
  saw: the page went to the same address (relative to the start URL, so that a server
  on another port still matches), and the element's state properties the action
  changed have the recorded values. A step whose effect differs, or whose action
  failed, diverges too.
- After a healed action, the program moves on to its next step when the recorded
  step's effect is there (or nothing recorded can be checked: the next step's locators
  and the task's own success check are then the check); when it is still missing, the
  model's action only prepared the way (it closed a dialog that hid the element) and
  the recorded step is tried again.
- A ``reveal`` step (skills induce them) is a search: while the next step's elements
  are not on the page, it clicks the next control of its role not yet tried and not
  already open (``selected`` or ``expanded``), in page order; once they are, the program
  moves on. It diverges (``none``) when every such control was tried. A tab or a section
  a person opens to find a link is where the link happens to be on that page, not a
  step of the task.
- Each program step may be healed ``heal_attempts`` times; then the replay stops with
  ``heal_failed``, or, with ``fallback`` (the replay cache), hands the rest of the
  episode to the model as an ordinary agent. A program that ends before the task does
  is healed the same way (``program_ended``): the model finishes the task, within the
  same bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from linewise.agent.action_parser import ParsedAction
from linewise.agent.page_view import page_key
from linewise.agent.policy import Decision
from linewise.axtree import element_lines
from linewise.locators import TreeIndex, describe, element_state
from linewise.prompts import render_prompt
from linewise.records import DivergenceReason, ReplayStep, ReplaySummary
from linewise.runtime.browser.observation import Observation
from linewise.runtime.replay.program import Program, ProgramStep

DEFAULT_HEAL_ATTEMPTS = 2


@dataclass
class ReplayPlan:
    """What the replay does at one step: at most one of ``decision`` (replay the
    recorded action), ``guidance`` (the model chooses, told this) or ``stop``; none
    once the replay handed the episode over to the model."""

    record: ReplayStep | None = None
    decision: Decision | None = None
    guidance: str | None = None
    stop: str | None = None
    """Why the replay ends here (a divergence with no healing left)."""


@dataclass
class _Ran:
    position: int
    mode: str
    error: str | None


class ReplayDriver:
    """One episode's replay of ``program``; ``heal``: whether a divergence goes to the
    action model (else the episode ends ``diverged``)."""

    def __init__(self, program: Program, *, heal: bool, fallback: bool = False,
                 heal_attempts: int = DEFAULT_HEAL_ATTEMPTS) -> None:
        self.program = program
        self.heal = heal
        self.fallback = fallback
        self._handed_over = False
        self.heal_attempts = heal_attempts
        self.summary = ReplaySummary(program=program.source, program_steps=len(program.steps))
        self.start_url = program.start_url
        self._position = 0
        self._ran: _Ran | None = None
        self._heals: dict[int, int] = {}
        self._tried: dict[int, set[tuple[object, ...]]] = {}
        """For each reveal step, the controls it clicked (by identity, as bids change)."""
        self._indexed: tuple[list[str], TreeIndex] | None = None
        self.healed: dict[int, ParsedAction] = {}
        """The action the model chose for each healed program step (``--update``)."""

    def _index(self, obs: Observation) -> TreeIndex:
        """The observed tree read once: ``may_settle``, the effect check and ``plan`` all
        look elements up in the same observation (a large page takes a fraction of a
        second to read)."""
        if self._indexed is None or self._indexed[0] is not obs.lines:
            self._indexed = (obs.lines, TreeIndex(obs.lines))
        return self._indexed[1]

    def begin(self, start_url: str) -> None:
        """The episode's start URL on this run: recorded addresses are rebased onto it."""
        self.start_url = start_url

    def plan(self, obs: Observation) -> ReplayPlan:
        """What to do on the page as observed now."""
        if self._handed_over:
            return ReplayPlan()  # the model decides, as an agent
        ran, self._ran = self._ran, None
        if ran is not None and self._reveals(ran.position):
            self._position, ran = ran.position, None  # the search goes on, or is done
        if ran is not None:
            problem = self._effect_problem(ran, obs)
            if problem is not None and ran.mode == "replayed":
                reason, detail = problem
                return self._diverge(ran.position, reason, detail)
            # A healed step moves the program on unless the recorded step's effect can
            # be checked and is still missing: then the model's action prepared the way
            # (a dialog dismissed) and the recorded step is tried again.
            # Past the end stays at the end: finishing the task has one healing budget.
            self._position = (ran.position if problem is not None
                              else min(ran.position + 1, len(self.program.steps)))
        if self._position >= len(self.program.steps):
            return self._diverge(self._position, "program_ended",
                                 "every recorded step ran and the task has not ended")
        step = self.program.steps[self._position]
        if step.reveal:
            searching = self._reveal(obs)
            if searching is not None:
                return searching
            self._position += 1  # what it uncovers is on the page
            if self._position >= len(self.program.steps):
                return self._diverge(self._position, "program_ended",
                                     "every recorded step ran and the task has not ended")
            step = self.program.steps[self._position]
        found: dict[str, str] = {}
        for target in step.targets:
            resolution = self._index(obs).resolve(target)
            if resolution.bid is None:
                assert resolution.reason is not None
                return self._diverge(self._position, resolution.reason, resolution.detail)
            found[target.bid] = resolution.bid
        action = _with_bids(step.parsed(), found, self.program.start_url, self.start_url)
        lines = element_lines(obs.lines, found.values())
        decision = Decision(
            think=step.thought, action=action, action_text=str(action),
            page_key=page_key(obs.url, obs.lines), url=obs.url,
            target=lines.get(next(iter(found.values()))) if found else None,
        )
        record = ReplayStep(mode="replayed", program_step=self._position,
                            recorded_action=step.action, resolved=found)
        return ReplayPlan(record=record, decision=decision)

    def _reveals(self, position: int) -> bool:
        return position < len(self.program.steps) and self.program.steps[position].reveal

    def _uncovered(self, position: int, index: TreeIndex) -> bool:
        """Whether the elements of the step after reveal step ``position`` are found."""
        if position + 1 >= len(self.program.steps):
            return True
        return all(index.resolve(t).bid is not None
                   for t in self.program.steps[position + 1].targets)

    def _reveal(self, obs: Observation) -> ReplayPlan | None:
        """The next click of the reveal step at the current position, None when what it
        uncovers is on the page, or a divergence when no control is left to try."""
        position, step = self._position, self.program.steps[self._position]
        index = self._index(obs)
        if self._uncovered(position, index) or not step.targets:
            return None
        target = step.targets[0]
        tried = self._tried.setdefault(position, set())
        for bid in index.bids():
            control = index.locate(bid)
            if control is None or (control.role, control.frames) != (target.role,
                                                                      target.frames):
                continue
            identity = (control.name, control.text, control.label, control.context,
                        control.ordinal)
            state = element_state(obs.lines, bid)
            if identity in tried or "true" in (state.get("selected", "").lower(),
                                               state.get("expanded", "").lower()):
                continue
            tried.add(identity)
            action = _with_bids(step.parsed(), {target.bid: bid}, self.program.start_url,
                                self.start_url)
            decision = Decision(
                think=step.thought, action=action, action_text=str(action),
                page_key=page_key(obs.url, obs.lines), url=obs.url,
                target=element_lines(obs.lines, [bid]).get(bid))
            record = ReplayStep(mode="replayed", program_step=position,
                                recorded_action=step.action, resolved={target.bid: bid})
            return ReplayPlan(record=record, decision=decision)
        wanted = "; ".join(describe(t) for t in self.program.steps[position + 1].targets)
        return self._diverge(position, "none", f"{len(tried)} {target.role} controls "
                             f"opened, and none uncovered {wanted}")

    def may_settle(self, obs: Observation) -> bool:
        """Whether the page may only not be ready yet (``plan`` would diverge for a
        reason time can change: an effect still missing, an element not there yet), so
        that the loop looks again before replaying on. A recording's steps were paced by
        a model; a replay's follow at once, ahead of a page still loading or animating.
        Changes nothing."""
        if self._handed_over:
            return False
        position, ran = self._position, self._ran
        if ran is not None and self._reveals(ran.position):
            # a control just opened: what it uncovers may still be appearing
            return not self._uncovered(ran.position, self._index(obs))
        if ran is not None:
            problem = self._effect_problem(ran, obs)
            if problem is not None and ran.mode == "replayed":
                return problem[0] == "effect"
            position = (ran.position if problem is not None
                        else min(ran.position + 1, len(self.program.steps)))
        if position >= len(self.program.steps) or self._reveals(position):
            return False
        return any(self._index(obs).resolve(target).bid is None
                   for target in self.program.steps[position].targets)

    def ran(self, plan: ReplayPlan, action_error: str | None) -> None:
        """The planned (or healed) action ran; its effect is checked at the next plan."""
        if plan.record is None:
            return
        mode = plan.record.mode
        if mode == "replayed":
            self.summary.replayed_steps += 1
        else:
            self.summary.healed_steps += 1
        self._ran = _Ran(plan.record.program_step, mode, action_error)

    def heal_chose(self, plan: ReplayPlan, action: ParsedAction | None) -> None:
        """The model's action for a healed step (kept for ``--update``)."""
        if plan.record is not None and action is not None:
            self.healed[plan.record.program_step] = action

    # ------------------------------------------------------------------ divergence

    def _diverge(self, position: int, reason: DivergenceReason, detail: str) -> ReplayPlan:
        step = self.program.steps[position] if position < len(self.program.steps) else None
        tries = self._heals.get(position, 0)
        if self.heal and self.fallback and tries >= self.heal_attempts:
            self._handed_over = True
            self.summary.fell_back_at = position
            self.summary.detail = f"{reason}: {detail}"
            return ReplayPlan()
        if not self.heal or tries >= self.heal_attempts:
            final: DivergenceReason = reason if not self.heal else "heal_failed"
            self.summary.diverged_at = position
            self.summary.divergence = final
            self.summary.detail = (detail if not self.heal else
                                   f"{tries} healing attempts did not bring the replay "
                                   f"back ({reason}: {detail})")
            where = (f"step {position + 1} of {len(self.program.steps)} ({step.action})"
                     if step is not None else "after the last recorded step")
            return ReplayPlan(stop=f"replay diverged at {where}: {reason}: "
                              f"{self.summary.detail}")
        self._heals[position] = tries + 1
        record = ReplayStep(mode="healed", program_step=position,
                            recorded_action=step.action if step is not None else "",
                            divergence=reason, detail=detail)
        return ReplayPlan(record=record, guidance=heal_guidance(step, reason, detail))

    def _effect_problem(self, ran: _Ran, obs: Observation
                        ) -> tuple[DivergenceReason, str] | None:
        """Why the step that ran did not do what the recording saw, or None (also when
        nothing recorded can be checked: a healed step past the program's end, an
        element that went away)."""
        if ran.position >= len(self.program.steps):
            return None
        step = self.program.steps[ran.position]
        if ran.error is not None:
            return "action_error", f"the action failed: {ran.error}"
        if step.url_after is not None:
            expected = rebase(step.url_after, self.program.start_url, self.start_url)
            if obs.url != expected:
                return "effect", f"the page went to {obs.url}, the recording to {expected}"
        for target, changed in zip(step.targets, step.state_after, strict=False):
            if not changed:
                continue
            found = self._index(obs).resolve(target).bid
            if found is None:
                continue  # the element went away (a dialog closed): nothing to compare
            state = element_state(obs.lines, found)
            wrong = {key: value for key, value in changed.items() if state.get(key) != value}
            if wrong:
                shown = ", ".join(f"{key}={state.get(key)!r} (recorded {value!r})"
                                  for key, value in wrong.items())
                return "effect", f"{describe(target)} is now {shown}"
        return None


def heal_guidance(step: ProgramStep | None, reason: DivergenceReason, detail: str) -> str:
    """What the action model is told at a healed step (``prompts/heal_step.md``)."""
    if step is None:
        return render_prompt("heal_finish.md", detail=detail)
    targets = "; ".join(describe(target) for target in step.targets) or "no element"
    return render_prompt(
        "heal_step.md", thought=(step.thought or "(none recorded)").strip(),
        action=step.action, targets=targets, detail=detail,
        ran=("It ran, but" if reason in ("effect", "action_error") else "It cannot run as "
             "recorded:"))


def rebase(url: str, recorded_start: str, start: str) -> str:
    """``url`` of a recording whose start URL was ``recorded_start``, on a run that
    starts at ``start``: an address on the recorded start's origin moves to the new
    start's origin (a local server on another port); any other stays."""
    if not recorded_start or not start:
        return url
    old, new, target = urlsplit(recorded_start), urlsplit(start), urlsplit(url)
    if (target.scheme, target.netloc) != (old.scheme, old.netloc):
        return url
    return urlunsplit((new.scheme, new.netloc, target.path, target.query, target.fragment))


def _with_bids(action: ParsedAction, found: dict[str, str], recorded_start: str,
               start: str) -> ParsedAction:
    """The recorded action on this page's elements (and a ``goto`` rebased)."""
    arguments = {
        key: found.get(value, value) if key.endswith("bid") and isinstance(value, str)
        else value
        for key, value in action.arguments.items()
    }
    if action.name == "goto" and isinstance(arguments.get("url"), str):
        arguments["url"] = rebase(arguments["url"], recorded_start, start)
    return ParsedAction(name=action.name, arguments=arguments)
