"""The episode loop: observe, decide, act, record — until the task is done or steps run out."""

from __future__ import annotations

import asyncio
import re
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from playwright.async_api import Error as PlaywrightError

from linewise.agent.action_parser import parse_action
from linewise.agent.actions import ActionContext
from linewise.agent.filters.base import FilterInput, FilterResult, ObservationFilter
from linewise.agent.filters.truncate import NoFilter
from linewise.agent.policy import ActionAgent, ChatModel, Decision, page_key
from linewise.agent.prompt import PageView
from linewise.errors import ActionParseError, BrowserError, LinewiseError, LLMError
from linewise.records import EpisodeSummary, StepRecord, StepTimings, TabRecord, Termination
from linewise.runtime.browser.chromium import Browser, BrowserSession
from linewise.runtime.browser.executor import SettleConfig, execute_action
from linewise.runtime.browser.observation import Observation, observe
from linewise.runtime.tasks.miniwob import MiniWoBServer, read_miniwob_status, start_miniwob_episode
from linewise.runtime.tasks.schema import MiniWoBTask, Task, WebTask
from linewise.runtime.trace import EpisodeTraceWriter, safe_name
from linewise.settings import AgentSettings, LinewiseSettings

log = structlog.get_logger(__name__)


@dataclass
class EpisodeConfig:
    """Per-episode knobs that are not part of the task."""

    agent: AgentSettings = field(default_factory=AgentSettings)
    screenshots: bool = True
    timeout_s: float | None = None
    settle: SettleConfig | None = None
    retriever_model: str = ""
    make_filter: Callable[[], ObservationFilter] = NoFilter

    @classmethod
    def from_settings(cls, settings: LinewiseSettings, **fields: Any) -> EpisodeConfig:
        """The agent's knobs from the settings; ``fields`` set the rest."""
        return cls(
            agent=settings.agent,
            screenshots=settings.screenshots,
            **fields,
        )

    def make_agent(self, model: ChatModel) -> ActionAgent:
        return ActionAgent(model, self.agent)


@dataclass
class EpisodeEnv:
    """The shared resources an episode runs on."""

    browser: Browser
    action_model: ChatModel
    miniwob: MiniWoBServer | None = None


class _Episode:
    """The state of one running episode; ``run_episode`` is its only entry point."""

    def __init__(self, task: Task, env: EpisodeEnv, directory: Path, config: EpisodeConfig):
        self.task = task
        self.env = env
        self.config = config
        self.writer = EpisodeTraceWriter(directory)
        self.agent = config.make_agent(env.action_model)
        self.filter = config.make_filter()
        self.summary = EpisodeSummary(
            episode_id=uuid.uuid4().hex[:12],
            task_id=task.id,
            action_model=env.action_model.model,
            retriever_model=config.retriever_model,
            filter=self.filter.name,
        )
        self.session: BrowserSession | None = None
        self.messages_to_user: list[str] = []
        self.infeasible_reason: str | None = None

    async def run(self) -> EpisodeSummary:
        started = time.perf_counter()
        self.writer.start(self.summary)
        try:
            async with asyncio.timeout(self.config.timeout_s):
                self.session = await self.env.browser.new_session()
                goal = await self._set_up()
                await self._loop(goal)
            self.summary.status = "finished"
        except TimeoutError:
            self._fail("timeout", f"episode exceeded its {self.config.timeout_s:.0f} s timeout")
        except (LinewiseError, PlaywrightError) as exc:
            self._fail("error", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a bug must still leave a readable trace behind
            self._fail("error", f"{type(exc).__name__}: {exc}")
            log.exception("episode crashed", task_id=self.task.id)
        finally:
            if self.session is not None:
                await self.session.close()
            self.summary.mark_ended(time.perf_counter() - started)
            self.writer.write_summary(self.summary)
        return self.summary

    def _fail(self, termination: Termination, message: str) -> None:
        self.summary.mark_failed(termination, message, traceback.format_exc())
        log.warning("episode failed", task_id=self.task.id, error=message)

    async def _set_up(self) -> str:
        assert self.session is not None
        page = self.session.page
        if isinstance(self.task, MiniWoBTask):
            if self.env.miniwob is None:
                raise LinewiseError("MiniWoB task given but no MiniWoB server is running")
            goal = await start_miniwob_episode(
                page, self.task.miniwob, self.task.seed, self.env.miniwob
            )
            self.summary.start_url = self.env.miniwob.url_for(self.task.miniwob)
        else:
            goal = self.task.goal
            self.summary.start_url = self.task.url
            try:
                await page.goto(self.task.url)
            except PlaywrightError as exc:
                raise BrowserError(
                    f"Could not open {self.task.url}: {exc.message.splitlines()[0]}"
                ) from exc
        self.summary.goal = goal
        self.writer.write_summary(self.summary)
        log.info("episode started", task_id=self.task.id, goal=goal)
        return goal

    async def _loop(self, goal: str) -> None:
        assert self.session is not None
        last_error: str | None = None
        for index in range(self.task.max_steps):
            record, last_error = await self._step(index, goal, last_error)
            self.writer.write_step(record)
            self.summary.add_step(record)
            log.info(
                "step",
                task_id=self.task.id,
                step=index,
                action=record.action or record.action_raw,
                error=record.action_error or record.parse_error,
                executed=record.action is not None,
                reward=record.reward,
            )
            if record.done:
                break
        else:
            self.summary.termination = "max_steps"
        await self._judge()

    async def _step(
        self, index: int, goal: str, last_error: str | None
    ) -> tuple[StepRecord, str | None]:
        assert self.session is not None
        step_started = time.perf_counter()
        obs = await observe(self.session, screenshot=self.config.screenshots)
        filtered = await self.filter.apply(self._filter_input(goal, obs, last_error))
        observed = time.perf_counter()
        view = _page_view(obs, last_error, filtered.text)
        try:
            decision = await self.agent.decide(goal, view)
        except LLMError as exc:
            partial = getattr(exc, "call", None)
            decision = Decision(error=str(exc), calls=[partial] if partial else [])
            record = self._record(index, obs, view, decision, None, step_started, filtered)
            self.writer.write_step(record)
            raise
        decided = time.perf_counter()
        action_error: str | None = None
        timings = StepTimings(observe_ms=(observed - step_started) * 1000)
        timings.agent_ms = (decided - observed) * 1000
        if decision.action is not None:
            ctx = ActionContext(
                self.session,
                timeout_ms=self.env.browser.config.action_timeout_ms,
                known_bids=frozenset(obs.elements),
                interactive_hint=obs.interactive_hint(),
            )
            outcome = await execute_action(decision.action, ctx, self.config.settle)
            action_error = outcome.error
            timings.act_ms, timings.settle_ms = outcome.duration_ms, outcome.settle_ms
            self.messages_to_user.extend(ctx.messages_to_user)
            self.infeasible_reason = ctx.infeasible_reason or self.infeasible_reason
        self.agent.remember(decision, action_error)
        record = self._record(index, obs, view, decision, action_error, step_started, filtered)
        record.timings = timings
        record.reward, record.done = await self._progress(decision)
        timings.total_ms = (time.perf_counter() - step_started) * 1000
        self.summary.time.observe_s += timings.observe_ms / 1000
        self.summary.time.act_s += (timings.act_ms + timings.settle_ms) / 1000
        return record, action_error or (decision.error if decision.action is None else None)

    def _filter_input(self, goal: str, obs: Observation, last_error: str | None) -> FilterInput:
        recent = self.agent.history[-2:]
        must_keep = [
            bid for step in recent if step.action for bid in _bids_in(step.action)
        ]
        return FilterInput(
            goal=goal,
            lines=obs.lines,
            history=[step.action or "" for step in self.agent.history],
            thoughts=[step.think or "" for step in self.agent.history],
            focused_bid=obs.focused_bid,
            last_action_error=last_error,
            must_keep_bids=must_keep,
        )

    def _record(
        self,
        index: int,
        obs: Observation,
        view: PageView,
        decision: Decision,
        action_error: str | None,
        started: float,
        filtered: FilterResult,
    ) -> StepRecord:
        screenshot = (
            self.writer.write_screenshot(index, obs.screenshot_png) if obs.screenshot_png else None
        )
        retriever_calls = filtered.calls
        misses = []
        if decision.action is not None and filtered.text != obs.text:
            shown = set(_SHOWN_BID.findall(filtered.text))
            misses = [bid for bid in decision.action.bids if bid not in shown]
            if misses:
                log.info("filter miss", task_id=self.task.id, bids=misses)
        filter_record = filtered.record(len(obs.lines), misses)
        return StepRecord(
            episode_id=self.summary.episode_id,
            task_id=self.task.id,
            index=index,
            url=obs.url,
            title=obs.title,
            tabs=[TabRecord(**tab.model_dump()) for tab in obs.tabs],
            focused_bid=obs.focused_bid,
            last_action_error=view.last_action_error,
            axtree=obs.numbered,
            axtree_lines=len(obs.lines),
            observation=view.text,
            filter=filtered.name,
            obs_tokens_full=filtered.tokens_full,
            obs_tokens_shown=filtered.tokens_shown,
            filter_result=filter_record,
            llm_calls=[*retriever_calls, *decision.calls],
            think=decision.think,
            action=str(decision.action) if decision.action else None,
            action_raw=decision.action_text,
            parse_error=decision.error if decision.action is None else None,
            repeat_escape=decision.repeat_escape,
            action_error=action_error,
            screenshot=screenshot,
            timings=StepTimings(total_ms=(time.perf_counter() - started) * 1000),
        )

    async def _progress(self, decision: Decision) -> tuple[float, bool]:
        """The reward so far and whether the episode is over."""
        assert self.session is not None
        if isinstance(self.task, MiniWoBTask):
            status = await read_miniwob_status(self.session.page)
            if status.done:
                self.summary.termination = "task_done"
            return status.reward, status.done
        if self.infeasible_reason is not None:
            self.summary.termination = "infeasible"
            return 0.0, True
        if decision.action is not None and decision.action.name == "send_msg_to_user":
            self.summary.termination = "agent_done"
            return 0.0, True
        return 0.0, False

    async def _judge(self) -> None:
        """Decide success once the loop is over."""
        assert self.session is not None
        self.summary.answer = self.messages_to_user[-1] if self.messages_to_user else None
        self.summary.infeasible_reason = self.infeasible_reason
        if isinstance(self.task, MiniWoBTask):
            self.summary.success = self.summary.reward > 0
            return
        assert isinstance(self.task, WebTask)
        if self.task.success is None:
            self.summary.success = None
            return
        page = await self.session.ensure_page()
        try:
            page_text = await page.inner_text("body", timeout=5000)
        except PlaywrightError:
            page_text = ""
        ok = self.task.success.evaluate(page.url, page_text, self.summary.answer)
        self.summary.success = ok
        self.summary.reward = 1.0 if ok else 0.0


_SHOWN_BID = re.compile(r"^\t*\[([A-Za-z0-9]+)\] ", re.MULTILINE)


def _bids_in(action_text: str) -> list[str]:
    try:
        return parse_action(action_text).bids
    except ActionParseError:
        return []


def _page_view(obs: Observation, last_error: str | None, text: str) -> PageView:
    return PageView(
        url=obs.url,
        tabs=[(t.index, t.title, t.url, t.active) for t in obs.tabs],
        focused_bid=obs.focused_bid,
        text=text,
        last_action_error=last_error,
        page_key=page_key(obs.url, obs.lines),
    )


def episode_directory(out_dir: Path, task: Task) -> Path:
    """A fresh folder for the task's episode under the run folder."""
    base = out_dir / safe_name(task.id)
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = out_dir / f"{base.name}-{n}"
    return candidate


async def run_episode(
    task: Task, env: EpisodeEnv, out_dir: Path, config: EpisodeConfig | None = None
) -> EpisodeSummary:
    """Run one task to the end and write its trace under ``out_dir``. Never raises for
    page, model or task trouble: the summary says what went wrong."""
    directory = episode_directory(out_dir, task)
    return await _Episode(task, env, directory, config or EpisodeConfig()).run()
