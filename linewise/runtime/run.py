"""A run: the shared resources (model server, browser, MiniWoB server) and its episodes.

``open_run_resources`` starts what the tasks and settings need and tears it down in
reverse order; ``run_tasks`` runs the episodes one after another and writes
``run.json`` beside the episode folders.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import structlog

from linewise.agent.experience.load import memory_for
from linewise.agent.filters.registry import FilterMaker
from linewise.agent.models import ChatModel
from linewise.agent.profile import profile_of
from linewise.errors import TraceWriteError
from linewise.files import write_atomically
from linewise.records import EpisodeSummary
from linewise.runtime.browser.chromium import Browser, BrowserConfig
from linewise.runtime.budget import Budget
from linewise.runtime.debug.highlight import highlight_hooks
from linewise.runtime.envs.browsergym_gym import check_family
from linewise.runtime.envs.factory import environment_for
from linewise.runtime.episode import (
    EpisodeConfig,
    StepHooks,
    episode_directory,
    run_in_environment,
)
from linewise.runtime.filter_choice import (
    FilterChoice,
    ResolvedFilter,
    build_filter_maker,
    resolve_filter,
)
from linewise.runtime.log import configure_logging
from linewise.runtime.models.factory import (
    LOCAL_TIMEOUT_S as LOCAL_TIMEOUT_S,  # importable from here, as before the factory
)
from linewise.runtime.models.factory import _local_slots as _local_slots
from linewise.runtime.models.factory import open_endpoints as open_endpoints
from linewise.runtime.models.factory import open_models as open_models
from linewise.runtime.playwright_trace import trace_hooks
from linewise.runtime.redaction import REDACTOR, redact_argv, redact_data
from linewise.runtime.replay.cache import ReplayCache
from linewise.runtime.replay.program import Program, task_spec
from linewise.runtime.replay.skill import skills_for
from linewise.runtime.secrets import SecretStore, merge_secret_specs
from linewise.runtime.tasks.loader import load_task_file
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.runtime.tasks.schema import AnyTask, BrowserGymTask, MiniWoBTask, WebTask
from linewise.settings import LinewiseSettings

log = structlog.get_logger(__name__)


@dataclass
class RunResources:
    browser: Browser
    action_client: ChatModel
    retriever_client: ChatModel | None
    """None when no filter of the run needs a retriever and none was given."""
    miniwob: MiniWoBServer | None

    def filter_maker(self, settings: LinewiseSettings, choice: ResolvedFilter) -> FilterMaker:
        """The per-episode maker of ``choice`` on these resources' retriever, sized by
        the profiles of the run's models."""
        return build_filter_maker(settings, choice, retriever=self.retriever_client,
                                  action_profile=profile_of(self.action_client))


def default_out_dir() -> Path:
    return Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")


@contextlib.asynccontextmanager
async def open_run_resources(
    settings: LinewiseSettings,
    tasks: Sequence[AnyTask],
    browser_config: BrowserConfig | None = None,
    *,
    action_model: ChatModel | None = None,
    retriever_model: ChatModel | None = None,
    need_retriever: bool = True,
) -> AsyncIterator[RunResources]:
    """Models, the browser and, when a task needs it, the MiniWoB server; torn down in
    reverse order. Given models are used as they are; endpoints are opened (see
    ``open_endpoints``) only for the action model if none is given and for the retriever
    if one is needed and none is given. BrowserGym task families are checked first, so
    a missing package or server fails here, not once per episode."""
    gym_families = {t.family for t in tasks if isinstance(t, BrowserGymTask)}
    for family in sorted(gym_families):
        check_family(family)
    async with contextlib.AsyncExitStack() as stack:
        open_retriever = need_retriever and retriever_model is None
        action_client, retriever_client = await stack.enter_async_context(open_endpoints(
            settings, action=action_model is None, retriever=open_retriever,
        ))
        action = action_model or action_client
        assert action is not None
        retriever = retriever_model or retriever_client
        browser = await stack.enter_async_context(
            Browser(browser_config or BrowserConfig.from_settings(settings.browser))
        )
        miniwob = None
        # BrowserGym's MiniWoB++ tasks read their pages from the same server (base_url).
        if any(isinstance(t, MiniWoBTask) for t in tasks) or "miniwob" in gym_families:
            miniwob = await stack.enter_async_context(MiniWoBServer())
        yield RunResources(browser, action, retriever, miniwob)


def prepare_run(settings: LinewiseSettings, tasks: Sequence[AnyTask]) -> LinewiseSettings:
    """The run's settings with the tasks' secrets merged in, once every secret's variable
    is known to be set; every secret value and API key is registered with the redactor
    before anything of the run is written or logged. A skills folder that cannot be read
    stops the run here, before anything starts (``ProgramError``)."""
    skills_for(settings.agent.skills)
    specs = merge_secret_specs(
        settings.secrets, *(t.secrets for t in tasks if isinstance(t, WebTask))
    )
    SecretStore.from_specs(specs)
    REDACTOR.add_api_keys([settings.action.api_key, settings.retriever.api_key])
    return settings.model_copy(update={"secrets": specs})


MANIFEST_MODE = 0o600
"""run.json and bench.json are readable by their owner only: they record the command
line and settings, and although keys and secrets are redacted from them, a value the
redactor was not told about (a token pasted into --goal, a password in a URL) would be
there in full. The traces themselves stay as the umask makes them."""


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a file only its owner can read, atomically.

    Raises:
        TraceWriteError: the folder is read-only, full or not allowed (the old file, if
            any, is left as it was).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text, mode=MANIFEST_MODE)
    except OSError as exc:
        raise TraceWriteError.of(path, exc) from exc


def environment_manifest(settings: LinewiseSettings) -> dict[str, object]:
    """Versions, platform and settings (API keys left out): what a run was made with."""
    return {
        "linewise": _version("linewise"),
        "playwright": _version("playwright"),
        "browsergym-core": _version("browsergym-core"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "settings": settings.model_dump(
            mode="json", exclude={"action": {"api_key"}, "retriever": {"api_key"}}
        ),
    }


def write_run_manifest(out_dir: Path, settings: LinewiseSettings, argv: list[str],
                       task_ids: Sequence[str] = ()) -> None:
    """``run.json``: what was run (the tasks in order, so that those that never started
    are known), with which versions and settings; ``TraceWriteError`` when it cannot be
    written."""
    manifest = {
        "argv": redact_argv(argv),
        "tasks": list(task_ids),
        "started_at": datetime.now().isoformat(timespec="seconds"),
        **environment_manifest(settings),
    }
    write_private(out_dir / "run.json", json.dumps(redact_data(manifest), indent=2))


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


class EpisodeFactory:
    """Assembles one episode on a run's shared resources and runs it: its environment,
    its filter, its agent and budget (``EpisodeConfig``) and its hooks. ``run_tasks``
    (so the Python API), the bench's runner (local and Ray) run every episode here.

    ``filters``: the run's filters, each resolved once at the edge of the run and bound
    here to the run's models; an episode names the one it runs with. ``hooks`` see every
    step after ``--highlight``'s box and before the Playwright trace's chunk starts (see
    ``run_tasks``); ``pause`` cuts the highlight's wait short. Once ``stop`` is set, a
    running episode ends after its step. ``budget``: the run's (``Budget.of`` the
    settings when not given), checked and charged by every episode made here.
    """

    def __init__(
        self,
        settings: LinewiseSettings,
        resources: RunResources,
        filters: Sequence[ResolvedFilter],
        *,
        timeout_s: float | None,
        hooks: Sequence[StepHooks] = (),
        pause: asyncio.Event | None = None,
        stop: asyncio.Event | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.settings = settings
        cache = settings.agent.replay_cache
        self.replay_cache = ReplayCache(cache) if cache is not None else None
        self.resources = resources
        self.timeout_s = timeout_s
        self.stop = stop
        self.makers: dict[str, FilterMaker] = {
            f.name: resources.filter_maker(settings, f) for f in filters}
        # Made once: a headless run says once that it ignores --highlight.
        self._hooks = [*highlight_hooks(settings, pause), *hooks]
        self.budget = budget if budget is not None else Budget.of(settings)
        """The run's limits (``run_exceeded``: no new episode once they are reached)."""

    async def run(self, task: AnyTask, directory: Path, filter: str, *,
                  program: Program | None = None, heal: bool = True) -> EpisodeSummary:
        """Run ``task`` with the filter named ``filter``, its trace in ``directory``.
        ``program``: replay it (``heal``: a step that does not fit goes to the model);
        without one, the replay cache's program for the task, if it holds one, is
        replayed, handing over to the model if healing fails. A successful episode
        leaves its program in the cache."""
        fallback = False
        if program is None and self.replay_cache is not None:
            program = self.replay_cache.lookup(task)
            fallback = heal = True
        summary = await self._run(task, directory, filter, program, heal, fallback)
        if (self.replay_cache is not None and summary.success
                and summary.outcome in ("agent", "replayed", "healed")):
            self.replay_cache.store(task, directory)
        return summary

    async def _run(self, task: AnyTask, directory: Path, filter: str,
                   program: Program | None, heal: bool, fallback: bool) -> EpisodeSummary:
        retriever = self.resources.retriever_client
        config = EpisodeConfig.from_settings(
            self.settings,
            timeout_s=self.timeout_s,
            retriever_model=retriever.model if retriever is not None else "",
            make_filter=self.makers[filter],
            budget=self.budget,
            stop=self.stop,
            program=program,
            heal=heal,
            fallback=fallback,
            task_spec=task_spec(task),
        )
        env = environment_for(task, self.resources.browser, self.resources.miniwob,
                              config.settle, directory)
        return await run_in_environment(
            env, task.id, task.max_steps, self.resources.action_client, directory, config,
            [*self._hooks, *trace_hooks(self.settings)],
        )


async def run_tasks(
    tasks: Sequence[AnyTask],
    settings: LinewiseSettings,
    out_dir: Path,
    *,
    browser_config: BrowserConfig | None = None,
    action_model: ChatModel | None = None,
    retriever_model: ChatModel | None = None,
    filter: FilterChoice | None = None,
    hooks: Sequence[StepHooks] = (),
    argv: list[str] | None = None,
    stop: asyncio.Event | None = None,
    pause: asyncio.Event | None = None,
    programs: Sequence[Program] | None = None,
    heal: bool = True,
) -> list[EpisodeSummary]:
    """Run every task in order; one episode's failure never stops the others.

    ``action_model`` and ``retriever_model`` are any objects with the chat-model
    protocol; the endpoints of ``settings`` are opened only for what is not given (the
    retriever only if the filter needs one). ``filter`` defaults to
    ``settings.filter.name``; ``browser_config`` to ``settings.browser``. ``hooks`` see
    every step of every episode, after ``--highlight``'s box (so that a hook deciding
    whether an action runs decides last) and before the Playwright trace's chunk starts
    (so that the chunk holds the action that runs). Once ``stop`` is set, the running
    episode ends after its step and no other starts; ``pause`` (a step-through debugger's
    pause event) cuts the highlight's wait short. ``programs``: one per task, replayed
    instead of asking the model (``heal``: the model heals a step that does not fit).

    Raises:
        TraceWriteError: ``out_dir`` cannot be written (read-only, full): the run stops
            at once, and the error names the episode cut short and the tasks not run.
    """
    if programs is not None and len(programs) != len(tasks):
        raise ValueError("run_tasks: one program per task")
    chosen = resolve_filter(filter if filter is not None else settings.filter.name)
    settings = prepare_run(settings, tasks)
    memory_for(settings)  # an unreadable --memory stops the run before anything starts
    try:
        write_run_manifest(out_dir, settings, argv or sys.argv, [task.id for task in tasks])
    except TraceWriteError as exc:
        raise exc.stopped_run(out_dir, not_run=[task.id for task in tasks]) from exc
    summaries: list[EpisodeSummary] = []
    async with open_run_resources(
        settings, tasks, browser_config, action_model=action_model,
        retriever_model=retriever_model,
        need_retriever=chosen.needs_retriever(settings.filter,
                                              endpoint_opened=action_model is None),
    ) as resources:
        episodes = EpisodeFactory(settings, resources, [chosen],
                                  timeout_s=settings.episode_timeout_s, hooks=hooks,
                                  pause=pause, stop=stop)
        for number, task in enumerate(tasks):
            if stop is not None and stop.is_set():
                break
            if (spent := episodes.budget.run_exceeded()) is not None:
                log.warning("run budget spent: no more episodes", reason=spent,
                            not_started=len(tasks) - number)
                break
            try:
                summary = await episodes.run(
                    task, episode_directory(out_dir, task.id), chosen.name,
                    program=programs[number] if programs is not None else None, heal=heal)
            except TraceWriteError as exc:
                # The disk refused the trace: no later episode could be recorded either.
                raise exc.stopped_run(out_dir, cut_short=[task.id], finished=len(summaries),
                                      not_run=[t.id for t in tasks[number + 1:]]) from exc
            summaries.append(summary)
            log.info(
                "episode finished",
                task_id=task.id,
                success=summary.success,
                reward=summary.reward,
                steps=summary.n_steps,
                termination=summary.termination,
                error=summary.error or summary.budget_stop,
            )
    return summaries


async def run(
    tasks: AnyTask | Sequence[AnyTask] | str | os.PathLike[str],
    *,
    model: ChatModel | None = None,
    retriever: ChatModel | None = None,
    filter: FilterChoice | None = None,
    settings: LinewiseSettings | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    hooks: Sequence[StepHooks] = (),
    memory: str | os.PathLike[str] | None = None,
    replay_cache: str | os.PathLike[str] | None = None,
    skills: str | os.PathLike[str] | None = None,
) -> list[EpisodeSummary]:
    """Run tasks from Python: the library's entry point.

    ``tasks`` is a task, a list of tasks or the path of a task file. ``model`` (and
    ``retriever``, for filters that need one) are any objects with an async
    ``complete(messages, **params)`` returning a ``Completion``; without them the
    endpoints of ``settings`` are used, or the embedded model. ``filter`` is a registered
    name, a registration, a factory or a filter object. ``settings`` default to the
    environment (``LINEWISE_…``, ``OPENAI_…``). Traces go to ``out_dir`` (default
    ``runs/<timestamp>``); the summaries come back in task order. ``memory``: an
    experience memory file (``linewise memory build``) whose worked examples the action
    model is shown (``settings.agent.memory``). ``replay_cache``: a folder of programs
    of solved tasks, replayed before the model is asked (``settings.agent.replay_cache``);
    ``skills``: a folder of skills the model may call (``settings.agent.skills``).
    """
    if not structlog.is_configured():
        # A library writes nothing to stdout: unless the application set logging up,
        # only warnings go to stderr.
        configure_logging(level="WARNING")
    task_list: list[AnyTask]
    if isinstance(tasks, str | os.PathLike):
        task_list = list(load_task_file(tasks))
    elif isinstance(tasks, WebTask | MiniWoBTask | BrowserGymTask):
        task_list = [tasks]
    else:
        task_list = list(tasks)
    chosen = settings if settings is not None else LinewiseSettings().resolved()
    agent = {**({"memory": Path(memory)} if memory is not None else {}),
             **({"replay_cache": Path(replay_cache)} if replay_cache is not None else {}),
             **({"skills": Path(skills)} if skills is not None else {})}
    if agent:
        chosen = chosen.model_copy(update={"agent": chosen.agent.model_copy(update=agent)})
    return await run_tasks(
        task_list, chosen, Path(out_dir) if out_dir is not None else default_out_dir(),
        action_model=model, retriever_model=retriever, filter=filter, hooks=hooks,
        argv=sys.argv,
    )


def run_sync(
    tasks: AnyTask | Sequence[AnyTask] | str | os.PathLike[str],
    **options: Any,
) -> list[EpisodeSummary]:
    """``run`` for code without an event loop of its own (same arguments)."""
    return asyncio.run(run(tasks, **options))
