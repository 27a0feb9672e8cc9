"""The step loop: observe, plan, show, decide, act, record — one loop for every environment.

``run_in_environment`` runs one task to the end on the environment it is given
(linewise's Chromium or BrowserGym's gym env, ``envs.factory.environment_for``) and
writes its trace as it goes; a run's episodes are assembled on its shared resources in
one place, ``runtime.run.EpisodeFactory``. Each step is a few named phases
(``_Episode._step``): the page is observed, a replay or a running skill plans, the agent
is shown its view of the page (the agent makes it: ``agent.page_view``), the step is
decided, acted and recorded. The phases pass structured values along (the parsed
action, the failed element's bid, the bids the filtered view showed), and the step's
``StepRecord`` is built in one place.

Hooks see every step at four fixed points — before the page is observed, after the
filter built the view, before the action runs (a hook may replace or drop it), and after
it ran — so features such as a step-through debugger or a navigation policy attach
without touching the loop.
"""

from __future__ import annotations

import asyncio
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from playwright.async_api import Error as PlaywrightError

from linewise.agent.action_parser import ParsedAction, parse_action
from linewise.agent.actions import ActionSet
from linewise.agent.experience.load import memory_for
from linewise.agent.experience.retrieve import ExperienceMemory
from linewise.agent.filters.base import FilterInput, FilterResult, ObservationFilter
from linewise.agent.filters.truncate import NoFilter
from linewise.agent.models import ChatModel
from linewise.agent.policy import ActionAgent, Decision
from linewise.agent.prompt import PageView
from linewise.axtree import bid_of, bids_in
from linewise.errors import (
    BrowserCrashed,
    BrowserStalled,
    EndpointRefused,
    LinewiseError,
    LLMError,
    TraceWriteError,
    infra_kind_of,
)
from linewise.locators import locate
from linewise.records import (
    EpisodeSummary,
    InfraKind,
    LLMCall,
    ManualStep,
    MemoryShown,
    NavigationEvents,
    Operator,
    StepFailure,
    StepRecord,
    StepStage,
    StepTimings,
    TargetBox,
    Termination,
)
from linewise.runtime.browser.executor import ActionOutcome, SettleConfig
from linewise.runtime.browser.observation import Observation
from linewise.runtime.budget import Budget
from linewise.runtime.envs.base import Environment
from linewise.runtime.replay.driver import ReplayDriver, ReplayPlan
from linewise.runtime.replay.program import Program
from linewise.runtime.replay.skill import SkillLibrary, skills_for
from linewise.runtime.replay.skill_runner import SkillRunner
from linewise.runtime.secrets import SecretsEnvironment, SecretStore
from linewise.runtime.tasks.browser_task import TaskStatus
from linewise.runtime.trace import EpisodeTraceWriter, safe_name
from linewise.settings import AgentSettings, LinewiseSettings

log = structlog.get_logger(__name__)

REPLAY_SETTLE_S = (0.25, 0.5, 1.0)
"""The waits before a replay looks at a page again that is not ready for its next step
(``ReplayDriver.may_settle``): an element still to appear, an effect still to come."""


@dataclass(frozen=True)
class EpisodeConfig:
    """Per-episode knobs that are not part of the task."""

    agent: AgentSettings = field(default_factory=AgentSettings)
    screenshots: bool = True
    timeout_s: float | None = None
    settle: SettleConfig | None = None
    retriever_model: str = ""
    make_filter: Callable[[], ObservationFilter] = NoFilter
    secrets: SecretStore = field(default_factory=SecretStore)
    budget: Budget = field(default_factory=Budget)
    stop: asyncio.Event | None = None
    """Set to stop the episode after its current step (the first Ctrl+C): it ends
    ``stopped``/``interrupted`` with its trace complete."""
    memory: ExperienceMemory | None = None
    """Worked examples for the action model (``--memory``), retrieved once per episode."""
    program: Program | None = None
    """Replay this program instead of asking the model at every step (``runtime/replay``)."""
    heal: bool = True
    """Whether a replayed step that does not fit the page goes to the action model (else
    the episode ends ``diverged``)."""
    fallback: bool = False
    """Whether a replay whose healing failed hands the episode to the model (the replay
    cache) instead of ending it ``diverged``."""
    skills: SkillLibrary | None = None
    """Skills the action model may call (``run_skill``, ``--skills``)."""
    task_spec: dict[str, Any] | None = None
    """The task's definition, recorded in the summary (what a replay sets up again)."""

    @classmethod
    def from_settings(
        cls, settings: LinewiseSettings, *, budget: Budget, **fields: Any
    ) -> EpisodeConfig:
        """The agent's knobs and secrets from the settings; ``budget``: the run's (built
        once per run, ``Budget.of``), which its episodes share; ``fields`` set the rest."""
        return cls(
            agent=settings.agent,
            screenshots=settings.screenshots,
            secrets=SecretStore.from_specs(settings.secrets),
            budget=budget,
            **{"memory": memory_for(settings), "skills": skills_for(settings.agent.skills),
               **fields},
        )

    def make_agent(self, model: ChatModel, *, agent_can_end: bool = True,
                   single_page: bool = False) -> ActionAgent:
        """The action policy, with the actions the task offers (``ActionSet.for_task``).
        Where the agent's answer does not end the episode (the task's own status does,
        as in MiniWoB++), it is never made to answer from its reasoning: a question such
        as "How many large items are there?" is answered there by clicking."""
        agent = self.agent
        if not agent_can_end and agent.answer_check != "off":
            agent = agent.model_copy(update={"answer_check": "off"})
        return ActionAgent(model, agent, action_names=ActionSet.for_task(
            agent_can_end=agent_can_end, single_page=single_page,
            skills=self.skills is not None))


@dataclass
class StepContext:
    """One step as the hooks see it; fields fill in as the step goes."""

    task_id: str
    index: int
    goal: str
    observation: Observation | None = None
    filter_input: FilterInput | None = None
    filtered: FilterResult | None = None
    decision: Decision | None = None
    action: ParsedAction | None = None
    """The action that will run (or ran): the model's, unless a hook replaced it."""
    outcome: ActionOutcome | None = None
    env: Environment | None = None
    """The episode's environment (hooks that record the browser reach it here)."""
    directory: Path | None = None
    """The episode's trace folder."""
    notes: dict[str, Any] = field(default_factory=dict)
    """What hooks want recorded with the step (``StepRecord.hook_notes``)."""
    operator: Operator | None = None
    """A person's decision on this step (a step-through hook sets it); ``stopped`` ends
    the episode after the step (``user_stopped``)."""
    manual: ManualStep | None = None
    """The page before and after a person's work by hand (``operator`` manual)."""
    replay: ReplayPlan | None = None
    """What a replay does at this step (a recorded action, or healing), when replaying."""
    hook_replaced: bool = False
    """Set by the loop once the ``before_act`` hooks ran: a hook's code changed the
    action no person decided (``StepRecord.hook_replaced``)."""

    def replace_action(self, action: ParsedAction | str | None) -> None:
        """Run ``action`` instead of the model's (from ``before_act``): an action as the
        model writes one (``"click('12')"``, parsed as its answers are), a parsed one, or
        None to run nothing.

        Raises:
            ActionParseError: the text is not a valid action.
        """
        self.action = parse_action(action) if isinstance(action, str) else action


class StepHooks:
    """Points of the step where other features attach. Override what you need."""

    async def before_observe(self, step: StepContext) -> None:
        """Before the page is read."""

    async def after_filter(self, step: StepContext) -> None:
        """The observation and the filtered view are known; the model has not been asked."""

    async def before_act(self, step: StepContext) -> None:
        """The model decided; ``step.replace_action(...)`` runs another action (or, with
        None, nothing)."""

    async def after_act(self, step: StepContext) -> None:
        """The action ran (``step.outcome``), or was skipped (``step.outcome`` is None)."""


class _Episode:
    """The state of one running episode; ``run_in_environment`` is its only entry point."""

    def __init__(
        self,
        task_id: str,
        max_steps: int,
        env: Environment,
        action_model: ChatModel,
        directory: Path,
        config: EpisodeConfig,
        hooks: Sequence[StepHooks],
    ) -> None:
        self.task_id = task_id
        self.max_steps = max_steps
        self.env = SecretsEnvironment(env, config.secrets)
        self.config = config
        self.hooks = list(hooks)
        self.writer = EpisodeTraceWriter(directory)
        self.agent = config.make_agent(action_model, agent_can_end=env.agent_can_end,
                                       single_page=env.single_page)
        self.filter = config.make_filter()
        goal, start_url = planned_start(env, config.task_spec)
        self.summary = EpisodeSummary(
            episode_id=uuid.uuid4().hex[:12],
            task_id=task_id,
            goal=goal,
            start_url=start_url,
            action_model=action_model.model,
            retriever_model=config.retriever_model,
            filter=self.filter.name,
            directory=directory,
            task=config.task_spec,
        )
        self.skills = (SkillRunner(config.skills, config.agent.skill_start)
                       if config.skills is not None and config.program is None else None)
        self.replay = (ReplayDriver(config.program, heal=config.heal, fallback=config.fallback)
                       if config.program is not None else None)
        if self.replay is not None:
            self.summary.replay = self.replay.summary
        self.memory_shown: MemoryShown | None = None
        self.messages_to_user: list[str] = []
        self.infeasible_reason: str | None = None
        self._deadline: asyncio.Timeout | None = None

    async def run(self) -> EpisodeSummary:
        # Every log line of the episode, the loop's and its filter's and model's, names
        # the task and the filter: two episodes of one task under two filters, running
        # at once in a bench, must read apart.
        with structlog.contextvars.bound_contextvars(task_id=self.task_id,
                                                     filter=self.filter.name):
            return await self._run()

    async def _run(self) -> EpisodeSummary:
        started = time.perf_counter()
        try:
            self.writer.start(self.summary)
        except TraceWriteError:
            await self.env.close()
            raise
        write_failed = False
        try:
            async with asyncio.timeout(self.config.timeout_s) as self._deadline:
                start = await self.env.reset()
                self.summary.goal, self.summary.start_url = start.goal, start.start_url
                if self.replay is not None:
                    self.replay.begin(start.start_url)
                self.writer.write_summary(self.summary)
                log.info("episode started", task_id=self.task_id, goal=start.goal)
                if await self._loop(start.goal):
                    await self._judge()
                if self.summary.termination == "diverged":
                    self.summary.success, self.summary.reward = False, 0.0
            if self.summary.status == "running":
                self.summary.status = "finished"
        except TimeoutError:
            self._fail("timeout", f"episode exceeded its {self.config.timeout_s:.0f} s timeout")
        except EndpointRefused as exc:  # no episode can run: the whole run stops
            self._fail("error", f"{type(exc).__name__}: {exc}", infra_kind_of(exc))
            raise
        except TraceWriteError as exc:  # nothing more can be recorded: the run stops
            self._fail("error", str(exc), "output")
            write_failed = True
            raise
        except BrowserCrashed as exc:
            self._fail("browser_crash" if exc.what == "browser" else "renderer_crash", str(exc),
                       "browser")
        except BrowserStalled as exc:
            self._fail("stalled", str(exc), "browser")
        except PlaywrightError as exc:
            self._fail("error", f"{type(exc).__name__}: {exc}", "browser")
        except LinewiseError as exc:
            self._fail("error", f"{type(exc).__name__}: {exc}", infra_kind_of(exc))
        except asyncio.CancelledError:
            # Stopped at once (second Ctrl+C, SIGTERM's or SIGHUP's grace period over, or
            # the caller cancelled): the same stop as after a step, only sooner, so
            # ``stopped`` and never ``failed``. The summary is still written below before
            # the cancellation goes on.
            log.info("episode stopped at once", task_id=self.task_id)
            self.summary.mark_stopped("interrupted", "episode was interrupted")
            raise
        except Exception as exc:  # a bug must still leave a readable trace behind
            self._fail("error", f"{type(exc).__name__}: {exc}", infra_kind_of(exc))
            log.exception("episode crashed", task_id=self.task_id)
        finally:
            # The summary first: closing a context on a dead or hung browser may itself
            # be cut short, and the trace must be complete whatever happens to it.
            self.summary.mark_ended(time.perf_counter() - started)
            try:
                self.writer.write_summary(self.summary)
            except TraceWriteError:
                if not write_failed:  # the first write the disk refused: the run stops
                    raise
                # the disk already refused the trace: the summary goes where it can
                log.warning("episode summary not written", task_id=self.task_id)
            finally:
                await self.env.close()
        return self.summary

    def _fail(
        self, termination: Termination, message: str, infra_kind: InfraKind | None = None
    ) -> None:
        self.summary.mark_failed(termination, message, traceback.format_exc(), infra_kind)
        log.warning("episode failed", task_id=self.task_id, error=message)

    async def _loop(self, goal: str) -> bool:
        """The steps; False when the run was stopped (nothing left to judge)."""
        outcome: ActionOutcome | None = None
        last_error: str | None = None
        for index in range(self.max_steps):
            if self.config.stop is not None and self.config.stop.is_set():
                log.info("episode stopped", task_id=self.task_id, steps=index)
                self.summary.mark_stopped("interrupted", "episode was interrupted")
                return False
            if (over := self.config.budget.exceeded(self.summary)) is not None:
                self.summary.termination, self.summary.budget_stop = "budget", over
                log.warning("episode stopped by its budget", task_id=self.task_id, reason=over)
                return True
            try:
                record, outcome, last_error = await self._step(index, goal, outcome,
                                                               last_error)
            except _Diverged as diverged:
                log.warning("replay diverged", task_id=self.task_id, reason=str(diverged))
                self.summary.termination, self.summary.error = "diverged", str(diverged)
                return True
            self.writer.write_step(record)
            self.summary.add_step(record)
            self.config.budget.charge(record)
            log.info(
                "step",
                task_id=self.task_id,
                step=index,
                action=record.action or record.action_raw,
                error=record.action_error or record.parse_error,
                executed=record.action is not None,
                reward=record.reward,
            )
            if record.done:
                return True
            if record.operator == "stopped":
                log.info("episode stopped by the operator", task_id=self.task_id, step=index)
                self.summary.mark_stopped("user_stopped", "the operator stopped the episode")
                return False
        self.summary.termination = "max_steps"
        return True

    async def _step(
        self, index: int, goal: str, previous: ActionOutcome | None, last_error: str | None
    ) -> tuple[StepRecord, ActionOutcome | None, str | None]:
        """One step, phase by phase: observe the page, plan from a replay or a running
        skill, show the agent its view, decide, act, and record. Returns the step's record,
        its outcome and what the next step is told went wrong."""
        step = StepContext(task_id=self.task_id, index=index, goal=goal, env=self.env.inner,
                           directory=self.writer.directory)
        started = time.perf_counter()
        obs = await self._observe(step)
        plan = self._plan(obs)
        view = await self._show(step, plan, previous, last_error)
        observed = time.perf_counter()
        timings = StepTimings(observe_ms=(observed - started) * 1000)
        step.replay = plan
        await self._decide(step, plan, view, timings, started)
        timings.agent_ms = (time.perf_counter() - observed) * 1000
        stage: StepStage = "act"
        try:
            error = await self._act(step, plan, timings)
            stage = "status"
            status = await self.env.status()
        except BaseException as exc:
            self._record_failure(step, view, timings, started, stage, exc)
            raise
        return self._finish(step, view, timings, started, status, error)

    async def _observe(self, step: StepContext) -> Observation:
        """Observe: the ``before_observe`` hooks, then the page as it is (looked at again
        while a replay or a running skill waits for it to settle)."""
        for hook in self.hooks:
            await hook.before_observe(step)
        step.observation = await self._observe_ready()
        return step.observation

    def _plan(self, obs: Observation) -> ReplayPlan | None:
        """Plan: what a replay does on this page (a recorded action, or healing), else
        what a running skill does next; None when the model decides alone.

        Raises:
            _Diverged: the replay cannot go on and may not heal.
        """
        plan = self.replay.plan(obs) if self.replay is not None else None
        if plan is not None and plan.stop is not None:
            raise _Diverged(plan.stop)
        if plan is None and self.skills is not None:
            plan = self.skills.next_step(obs)
        return plan

    async def _show(self, step: StepContext, plan: ReplayPlan | None,
                    previous: ActionOutcome | None, last_error: str | None) -> PageView:
        """Show: the agent's view of the page, which the agent makes (``page_view``).
        A replayed step's view is the elements its recorded action names, no filter
        asked; any other's is the filter's, fitted to the prompt, with the skills on
        offer and a replay's or skill's guidance. The ``after_filter`` hooks see the
        filter's view before the agent's is made of it."""
        obs = step.observation
        assert obs is not None
        if step.index == 0 and self.config.memory is not None:
            self.memory_shown = await self.agent.recall(self.config.memory, self.task_id,
                                                        step.goal, obs)
        step.filter_input, view = self.agent.look_at(
            step.goal, obs, last_error=last_error,
            failed_bid=previous.failed_bid if previous is not None else None)
        if plan is not None and plan.decision is not None:
            action = plan.decision.action
            step.filtered = step.filter_input.keep(
                "replay", _lines_of(obs.lines, action.bids if action else []))
        else:
            if self.skills is not None:
                view.guidance = self.skills.take_note()
                view.skills = self.skills.offers(step.goal, obs.lines)
            if plan is not None:
                view.guidance = plan.guidance or ""
            step.filtered = await self.agent.filter_view(step.goal, view, step.filter_input,
                                                         self.filter)
        for hook in self.hooks:
            await hook.after_filter(step)
        return self.agent.show(view, obs, step.filtered)

    async def _decide(self, step: StepContext, plan: ReplayPlan | None, view: PageView,
                      timings: StepTimings, started: float) -> None:
        """Decide: a replayed step's recorded action, else the skill the goal names on
        the first step, else the model's answer. A model that fails leaves the step
        written with its calls before the failure ends the episode."""
        try:
            if plan is not None and plan.decision is not None:
                step.decision = plan.decision
            elif self.skills is not None and (by_goal := self.skills.goal_decision(
                    view, first_step=not self.agent.history)) is not None:
                step.decision = by_goal
            else:
                step.decision = await self.agent.decide(step.goal, view, self._spend_check)
        except LLMError as exc:
            step.decision = Decision(error=str(exc), calls=[exc.call] if exc.call else [])
            self.writer.write_step(self._record(step, view, timings, started))
            raise

    async def _act(self, step: StepContext, plan: ReplayPlan | None,
                   timings: StepTimings) -> str | None:
        """Act: the ``before_act`` hooks may replace the decided action or drop it; a
        ``run_skill`` call starts its skill and runs the skill's first step; the
        ``after_act`` hooks see the outcome. Returns the action's error, if any."""
        assert step.decision is not None and step.observation is not None
        step.action = step.decision.action
        for hook in self.hooks:
            await hook.before_act(step)
            replaced: object = step.action
            if isinstance(replaced, str):  # set as text, not through replace_action
                step.replace_action(replaced)
        # Code that changed the action is marked as a person's decision is: what runs is
        # no longer the model's choice (a person's own decision, recorded in
        # ``operator``, is theirs and not code's).
        step.hook_replaced = (step.operator in (None, "approved")
                              and step.action != step.decision.action)
        if step.action is not None and step.action.name == "run_skill":
            skill = (self.skills.begin(step.action, step.observation,
                                       by_model=bool(step.decision.calls))
                     if self.skills is not None else "No skills are loaded (--skills).")
            if isinstance(skill, str):
                step.outcome = ActionOutcome(error=skill)
            else:
                assert skill.decision is not None
                step.replay, step.action = skill, skill.decision.action
        if step.outcome is None and step.action is not None:
            step.outcome = await self.env.act(step.action)
            timings.act_ms = step.outcome.duration_ms
            timings.settle_ms = step.outcome.settle_ms
            self._note_agent_messages(step.action)
        for hook in self.hooks:
            await hook.after_act(step)
        error = step.outcome.error if step.outcome else None
        self._remember(step, plan, error)
        return error

    def _remember(self, step: StepContext, plan: ReplayPlan | None, error: str | None) -> None:
        """What ran goes into the agent's history, and to the replay or the skill that
        planned it: whether it ran, failed, or was healed."""
        assert step.decision is not None
        self.agent.remember(_what_ran(step), error)
        if plan is not None and self.replay is not None:
            if plan.guidance is not None:
                self.replay.heal_chose(plan, step.action)
            self.replay.ran(plan, error or (step.decision.error
                                            if step.action is None else None))
        elif step.replay is not None and self.skills is not None:
            self.skills.ran(step.replay, error)

    def _record_failure(self, step: StepContext, view: PageView, timings: StepTimings,
                        started: float, stage: StepStage, exc: BaseException) -> None:
        """Record a step the model answered that failed while acting or reading the
        task's status: written with its answer and the failure, whatever ends the
        episode (a stall, a crash, its timeout, Ctrl+C)."""
        failure = StepFailure(stage=stage, kind=self._failure_kind(exc),
                              message=str(exc) or type(exc).__name__)
        record = self._record(step, view, timings, started, failure=failure)
        self.writer.write_step(record)
        self.summary.add_step(record)

    def _finish(self, step: StepContext, view: PageView, timings: StepTimings,
                started: float, status: TaskStatus, error: str | None,
                ) -> tuple[StepRecord, ActionOutcome | None, str | None]:
        """Record: the step's record, whether the episode ended, and what the next step
        is told went wrong (the action's error, or why no action came out)."""
        assert step.decision is not None
        done = self._ended(status.done, step.action)
        record = self._record(step, view, timings, started, reward=status.reward, done=done,
                              navigation=self.env.take_navigation_events())
        self.summary.time.observe_s += timings.observe_ms / 1000
        self.summary.time.act_s += (timings.act_ms + timings.settle_ms) / 1000
        next_error = error or (step.decision.error if step.decision.action is None else None)
        return record, step.outcome, next_error

    async def _observe_ready(self) -> Observation:
        """The page, looked at again a few times while a replay (or a running skill) is
        waiting for it to settle."""
        obs = await self.env.observe(screenshot=self.config.screenshots)
        driver = self.replay or (self.skills.driver if self.skills is not None else None)
        if driver is None:
            return obs
        for wait_s in REPLAY_SETTLE_S:
            if not driver.may_settle(obs):
                break
            await asyncio.sleep(wait_s)
            obs = await self.env.observe(screenshot=self.config.screenshots)
        return obs

    def _spend_check(self, calls: list[LLMCall]) -> str | None:
        """Why this step may make no more calls: the budget, counting its calls so far."""
        return self.config.budget.exceeded(self.summary, pending=calls)

    def _failure_kind(self, exc: BaseException) -> str:
        if isinstance(exc, BrowserCrashed):
            return f"{exc.what}_crash"
        if isinstance(exc, BrowserStalled):
            return "stalled"
        if isinstance(exc, asyncio.CancelledError):
            expired = self._deadline is not None and self._deadline.expired()
            return "timeout" if expired else "interrupted"
        return type(exc).__name__

    def _note_agent_messages(self, action: ParsedAction) -> None:
        """The agent's words to the user, kept structured from its action's arguments."""
        if action.name == "send_msg_to_user":
            self.messages_to_user.append(str(action.arguments.get("text", "")))
        elif action.name == "report_infeasible":
            self.infeasible_reason = str(action.arguments.get("reason", ""))

    def _ended(self, task_done: bool, action: ParsedAction | None) -> bool:
        if task_done:
            self.summary.termination = "task_done"
            return True
        if not self.env.agent_can_end:
            return False
        if self.infeasible_reason is not None:
            self.summary.termination = "infeasible"
            return True
        if action is not None and action.name == "send_msg_to_user":
            self.summary.termination = "agent_done"
            return True
        return False

    def _record(
        self,
        step: StepContext,
        view: PageView,
        timings: StepTimings,
        started: float,
        *,
        reward: float = 0.0,
        done: bool = False,
        failure: StepFailure | None = None,
        navigation: NavigationEvents | None = None,
    ) -> StepRecord:
        """The step's trace record: built here and nowhere else. ``navigation``: the
        page loads refused and downloads of the step (none when it failed midway)."""
        navigation = navigation or NavigationEvents()
        obs, filtered, decision = step.observation, step.filtered, step.decision
        assert obs is not None and filtered is not None and decision is not None
        screenshot = (
            self.writer.write_screenshot(step.index, obs.screenshot_png)
            if obs.screenshot_png
            else None
        )
        misses, absent = filter_misses(step.action, obs.lines, filtered.shown_bids,
                                       whole=len(filtered.kept_lines) >= len(obs.lines))
        if misses:
            log.info("filter miss", task_id=self.task_id, bids=misses)
        timings.total_ms = (time.perf_counter() - started) * 1000
        return StepRecord(
            episode_id=self.summary.episode_id,
            task_id=self.task_id,
            index=step.index,
            url=obs.url,
            title=obs.title,
            tabs=obs.tabs,
            focused_bid=obs.focused_bid,
            last_action_error=view.last_action_error,
            axtree=obs.numbered,
            axtree_lines=len(obs.lines),
            observation=view.text,
            filter=filtered.name,
            obs_tokens_full=filtered.tokens_full,
            obs_tokens_shown=filtered.tokens_shown,
            filter_result=filtered.record(len(obs.lines), misses),
            llm_calls=[*filtered.calls, *decision.calls],
            think=decision.think,
            action=str(step.action) if step.action else None,
            action_raw=decision.action_text,
            parse_error=decision.error if decision.action is None else None,
            repeat_escape=decision.repeat_escape,
            action_decoding=decision.decoding,
            answer_check=decision.answer_check,
            memory=self.memory_shown,
            reasks_stopped=decision.reasks_stopped,
            action_error=step.outcome.error if step.outcome else None,
            absent_bids=absent,
            target_box=_on_screenshot(step.outcome.target_box if step.outcome else None,
                                      obs.screenshot_clip if screenshot else None),
            targets=[found for bid in (step.action.bids if step.action else [])
                     if (found := locate(obs.lines, bid)) is not None],
            replay=step.replay.record if step.replay is not None else None,
            reward=reward,
            done=done,
            screenshot=screenshot,
            screenshot_clip=obs.screenshot_clip if screenshot else None,
            timings=timings,
            hook_notes=step.notes,
            operator=step.operator,
            model_action=(
                (str(decision.action) if decision.action else decision.action_text)
                if (step.operator is not None and step.operator != "approved")
                or step.hook_replaced else None
            ),
            hook_replaced=step.hook_replaced,
            manual=step.manual,
            skipped_frames=obs.skipped_frames,
            dialogs=obs.dialogs,
            failure=failure,
            blocked=navigation.blocked,
            downloads=navigation.downloads,
            refused_connections=navigation.refused_connections,
            refused_connections_more=navigation.refused_connections_more,
            invisible_text=obs.invisible,
        )

    async def _judge(self) -> None:
        """Decide success once the loop is over."""
        self.summary.answer = self.messages_to_user[-1] if self.messages_to_user else None
        self.summary.infeasible_reason = self.infeasible_reason
        success = await self.env.judge(self.summary.answer, self.summary.reward)
        self.summary.success = success
        self.summary.attack = await self.env.judge_attack(self.summary.answer)
        if success is not None and self.env.agent_can_end:
            self.summary.reward = 1.0 if success else 0.0


def planned_start(env: Environment, task_spec: dict[str, Any] | None) -> tuple[str, str]:
    """The goal and start URL the task names before its page is open (``reset`` puts
    the page's own in their place): an episode that cannot start still says what it
    was for. A MiniWoB++ page sets its goal itself: none before it opens."""
    spec = task_spec or {}
    start_url = getattr(getattr(env, "task", None), "start_url", None) or spec.get("url")
    return str(spec.get("goal") or ""), str(start_url or "")


def filter_misses(action: ParsedAction | None, tree_lines: Sequence[str],
                  shown_bids: Iterable[str], *, whole: bool = False
                  ) -> tuple[list[str], list[str]]:
    """The action's bids the filter hid (in the tree, not shown), and those in no line
    of the tree at all: a guess of the model's, which no filter could have shown. A
    filter that kept every line (``whole``) hid nothing."""
    if action is None or not action.bids:
        return [], []
    in_tree = set(bids_in(tree_lines))
    shown = in_tree if whole else set(shown_bids)
    misses = [bid for bid in action.bids if bid in in_tree and bid not in shown]
    return misses, [bid for bid in action.bids if bid not in in_tree]


class _Diverged(Exception):
    """A replay met a step it cannot replay and may not heal: the episode ends."""


def _lines_of(lines: Sequence[str], bids: Iterable[str]) -> list[int]:
    """The 1-based numbers of the lines that carry these bids."""
    wanted = set(bids)
    return [number for number, line in enumerate(lines, 1) if bid_of(line) in wanted]


def _on_screenshot(box: TargetBox | None, clip: TargetBox | None) -> TargetBox | None:
    """The target's box in the coordinates of the step's screenshot, which may show
    only part of the viewport (``clip``), so the viewer boxes it where it is drawn."""
    if box is None or clip is None:
        return box
    return box.model_copy(update={"x": box.x - clip.x, "y": box.y - clip.y})


def _what_ran(step: StepContext) -> Decision:
    """The decision as the agent should remember it: with the action a person or a hook
    ran instead of the model's (nothing, if they skipped it or acted by hand)."""
    assert step.decision is not None
    if step.operator in (None, "approved") and step.action == step.decision.action:
        return step.decision
    return step.decision.model_copy(update={
        "action": step.action, "action_text": str(step.action) if step.action else None,
    })


def episode_directory(out_dir: Path, task_id: str) -> Path:
    """A fresh folder for the task's episode under the run folder."""
    base = out_dir / safe_name(task_id)
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = out_dir / f"{base.name}-{n}"
    return candidate


async def run_in_environment(
    env: Environment,
    task_id: str,
    max_steps: int,
    action_model: ChatModel,
    directory: Path,
    config: EpisodeConfig | None = None,
    hooks: Sequence[StepHooks] = (),
) -> EpisodeSummary:
    """The step loop on any environment, writing the trace into ``directory``. Never
    raises for page, model or task trouble: the summary says what went wrong."""
    episode = _Episode(
        task_id, max_steps, env, action_model, directory, config or EpisodeConfig(), hooks
    )
    return await episode.run()
