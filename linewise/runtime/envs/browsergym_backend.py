"""BrowserGym's registered tasks in the bench: its sync env in a dedicated thread each.

The task's own set-up, observation and validation are BrowserGym's (``env.reset``,
``env.step``, the reward it returns); the agent, the filters, the model clients and the
trace format are linewise's. The episode runs in a thread of its own (sync Playwright
cannot run on the asyncio loop) with its own Playwright instance, and calls back into
the loop for every model and filter call, so the bench's bounds on requests in flight
and per second hold for these episodes too. See ``runtime/browsergym_env.py`` for the
fixes the env needs here.

WebArena and WorkArena tasks need their servers: ``check_family`` names the missing
environment variables before anything starts.
"""

from __future__ import annotations

import asyncio
import threading
import time
import traceback
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import structlog

from linewise.agent.filters.base import FilterInput
from linewise.agent.policy import Decision, page_key
from linewise.agent.prompt import PageView
from linewise.axtree import number_lines
from linewise.errors import LLMError
from linewise.records import EpisodeSummary, StepRecord, StepTimings, Termination
from linewise.runtime.envs.browsergym_gym import make_env, stop_thread_playwright
from linewise.runtime.episode import EpisodeConfig, EpisodeEnv
from linewise.runtime.tasks.schema import BrowserGymTask
from linewise.runtime.trace import EpisodeTraceWriter

log = structlog.get_logger(__name__)

T = TypeVar("T")


async def run_browsergym_episode(
    task: BrowserGymTask, env: EpisodeEnv, folder: Path, config: EpisodeConfig
) -> EpisodeSummary:
    """Run the episode in a new thread; the summary comes back to the loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[EpisodeSummary] = loop.create_future()
    stop = threading.Event()
    task_kwargs = dict(task.task_kwargs)
    if task.family == "miniwob" and env.miniwob is not None:
        task_kwargs.setdefault("base_url", env.miniwob.base_url)
    episode = _ThreadEpisode(task, env, folder, config, loop, stop, task_kwargs)

    def deliver(result: EpisodeSummary | BaseException) -> None:
        if done.done():
            return
        if isinstance(result, BaseException):
            done.set_exception(result)
        else:
            done.set_result(result)

    def target() -> None:
        try:
            outcome: EpisodeSummary | BaseException = episode.run()
        except BaseException as exc:
            outcome = exc
        finally:
            stop_thread_playwright()
        try:
            loop.call_soon_threadsafe(deliver, outcome)
        except RuntimeError:  # the loop is gone (the bench was interrupted)
            pass

    threading.Thread(target=target, name=f"browsergym-{task.id}", daemon=True).start()
    try:
        return await done
    finally:
        stop.set()  # on cancellation the thread ends after its current step


class _ThreadEpisode:
    """One episode, run synchronously in its thread."""

    def __init__(self, task: BrowserGymTask, env: EpisodeEnv, folder: Path,
                 config: EpisodeConfig, loop: asyncio.AbstractEventLoop,
                 stop: threading.Event, task_kwargs: dict[str, Any]) -> None:
        self.task = task
        self.env = env
        self.config = config
        self.loop = loop
        self.stop = stop
        self.task_kwargs = task_kwargs
        self.writer = EpisodeTraceWriter(folder)
        self.agent = config.make_agent(env.action_model)
        self.filter = config.make_filter()
        self.summary = EpisodeSummary(
            episode_id=uuid.uuid4().hex[:12], task_id=task.id,
            action_model=env.action_model.model, retriever_model=config.retriever_model,
            filter=self.filter.name, start_url=task.env_id,
        )

    def _await(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def run(self) -> EpisodeSummary:
        started = time.perf_counter()
        self.writer.start(self.summary)
        gym_env = None
        try:
            browser = self.env.browser.config
            gym_env = make_env(
                self.task.env_id, task_kwargs=self.task_kwargs, headless=browser.headless,
                slow_mo_ms=browser.slow_mo_ms, timeout_ms=browser.action_timeout_ms,
                action_timeout_ms=browser.action_timeout_ms,
            )
            obs, _ = gym_env.reset(seed=self.task.seed)
            self.summary.goal = obs.get("goal") or ""
            self.writer.write_summary(self.summary)
            self._loop(gym_env, obs, started)
            self.summary.status = "finished"
        except LLMError as exc:
            self._fail("error", f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            self._fail("error", f"{type(exc).__name__}: {exc}")
        finally:
            if gym_env is not None:
                try:
                    gym_env.close()
                except Exception as exc:
                    log.warning("browsergym env did not close", error=str(exc))
            self.summary.mark_ended(time.perf_counter() - started)
            self.writer.write_summary(self.summary)
        return self.summary

    def _fail(self, termination: Termination, message: str) -> None:
        self.summary.mark_failed(termination, message, traceback.format_exc())
        log.warning("episode failed", task_id=self.task.id, error=message)

    def _loop(self, gym_env: Any, obs: dict[str, Any], started: float) -> None:
        from browsergym.utils.obs import flatten_axtree_to_str

        goal = self.summary.goal
        timeout = self.config.timeout_s
        for index in range(self.task.max_steps):
            if self.stop.is_set() or (timeout and time.perf_counter() - started > timeout):
                self._fail("timeout", f"episode exceeded its {timeout or 0:.0f} s timeout")
                return
            step_started = time.perf_counter()
            lines = [line for line in flatten_axtree_to_str(
                obs["axtree_object"], extra_properties=obs.get("extra_element_properties"),
                with_clickable=True, skip_generic=True,
            ).split("\n") if line.strip()]
            last_error = obs.get("last_action_error") or None
            filtered = self._await(self.filter.apply(FilterInput(
                goal=goal, lines=lines,
                history=[s.action or "" for s in self.agent.history],
                thoughts=[s.think or "" for s in self.agent.history],
                focused_bid=obs.get("focused_element_bid") or "",
                last_action_error=last_error,
            )))
            url = obs.get("url", "")
            view = PageView(url=url, text=filtered.text,
                            focused_bid=obs.get("focused_element_bid") or "",
                            last_action_error=last_error,
                            page_key=page_key(url, lines))
            observed = time.perf_counter()
            decision: Decision = self._await(self.agent.decide(goal, view))
            decided = time.perf_counter()
            action = str(decision.action) if decision.action else "noop()"
            obs, reward, terminated, truncated, _ = gym_env.step(action)
            action_error = obs.get("last_action_error") or None
            self.agent.remember(decision, action_error)
            calls = [*filtered.calls, *decision.calls]
            record = StepRecord(
                episode_id=self.summary.episode_id, task_id=self.task.id, index=index,
                url=view.url, axtree=number_lines(lines), axtree_lines=len(lines),
                observation=filtered.text, filter=filtered.name,
                obs_tokens_full=filtered.tokens_full, obs_tokens_shown=filtered.tokens_shown,
                filter_result=filtered.record(len(lines)),
                llm_calls=calls, think=decision.think,
                action=str(decision.action) if decision.action else None,
                action_raw=decision.action_text,
                parse_error=decision.error if decision.action is None else None,
                repeat_escape=decision.repeat_escape,
                action_error=action_error, reward=float(reward),
                done=bool(terminated or truncated),
                timings=StepTimings(
                    observe_ms=(observed - step_started) * 1000,
                    agent_ms=(decided - observed) * 1000,
                    act_ms=(time.perf_counter() - decided) * 1000,
                    total_ms=(time.perf_counter() - step_started) * 1000,
                ),
            )
            self.writer.write_step(record)
            self.summary.add_step(record)
            if terminated or truncated:
                self.summary.termination = "task_done" if terminated else "max_steps"
                break
        else:
            self.summary.termination = "max_steps"
        self.summary.success = self.summary.reward > 0
