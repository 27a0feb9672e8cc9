"""A run: the shared resources (model server, browser, MiniWoB server) and its episodes.

``open_run_resources`` starts what the tasks and settings need and tears it down in
reverse order; ``run_tasks`` runs the episodes one after another and writes
``run.json`` beside the episode folders.
"""

from __future__ import annotations

import contextlib
import json
import platform
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path

import openai
import structlog

from linewise.agent.filters.registry import FilterFactory, filter_factory
from linewise.errors import EndpointUnreachable, LLMError
from linewise.records import EpisodeSummary
from linewise.runtime.browser.chromium import Browser, BrowserConfig
from linewise.runtime.episode import EpisodeConfig, EpisodeResources, run_episode
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.models.files import resolve_model_path
from linewise.runtime.models.local_server import LocalModelServer
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.runtime.tasks.schema import MiniWoBTask, Task
from linewise.settings import EndpointSettings, LinewiseSettings

log = structlog.get_logger(__name__)

LOCAL_RETRIEVER_WINDOW_TOKENS = 8192
"""Windows for the embedded retriever: on a CPU, prefill slows as the context grows, so
several 8k windows cost less time than one long prompt (and a 1.5B model reads them better)."""

LOCAL_TIMEOUT_S = 1800.0


@dataclass
class RunResources:
    browser: Browser
    action_client: ChatClient
    retriever_client: ChatClient
    miniwob: MiniWoBServer | None


def default_out_dir() -> Path:
    return Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")


async def check_endpoint(endpoint: EndpointSettings) -> None:
    """Fail fast, naming the URL, when nothing answers at the endpoint or it refuses the key.

    Any other answer (even 404: not every server lists models) counts as reachable.
    """
    assert endpoint.base_url is not None
    client = openai.AsyncOpenAI(
        base_url=endpoint.base_url,
        api_key=endpoint.api_key or "not-needed",
        timeout=10.0,
        max_retries=0,
    )
    try:
        await client.models.list()
    except openai.AuthenticationError as exc:
        raise LLMError(f"LLM endpoint {endpoint.base_url} refused the API key: {exc}") from exc
    except openai.APIConnectionError as exc:
        raise EndpointUnreachable(endpoint.base_url, str(exc.__cause__ or exc)) from exc
    except openai.APIStatusError:
        pass
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def open_models(settings: LinewiseSettings) -> AsyncIterator[tuple[ChatClient, ChatClient]]:
    """The action and retriever clients: the embedded model server is started when an
    endpoint is missing, and every endpoint is checked before anything runs."""
    async with contextlib.AsyncExitStack() as stack:
        action, retriever = settings.action, settings.retriever
        if settings.uses_local_model:
            model_path = resolve_model_path(
                str(settings.local.gguf) if settings.local.gguf else None
            )
            server = LocalModelServer(
                model_path,
                ctx_size=settings.local.ctx_size,
                threads=settings.local.threads,
                parallel=settings.local.parallel,
                startup_timeout_s=settings.local.startup_timeout_s,
            )
            log.info("starting local model", model=str(model_path))
            await stack.enter_async_context(server)
            served = {"base_url": server.base_url, "model": server.model_name, "api_key": "local",
                      "max_retries": 0}
            if action.base_url is None:
                action = action.model_copy(update={**served, **_local_slots(action, settings)})
            if retriever.base_url is None:
                retriever = retriever.model_copy(
                    update={**served, **_local_slots(retriever, settings)}
                )
        for endpoint in {action.base_url: action, retriever.base_url: retriever}.values():
            await check_endpoint(endpoint)
        action_client = ChatClient(action)
        stack.push_async_callback(action_client.close)
        retriever_client = (
            action_client if retriever == action else ChatClient(retriever)
        )
        if retriever_client is not action_client:
            stack.push_async_callback(retriever_client.close)
        yield action_client, retriever_client


def _local_slots(endpoint: EndpointSettings, settings: LinewiseSettings) -> dict[str, float]:
    """The embedded server works on ``parallel`` requests at once; so may the client.

    More requests in flight than slots would wait in the server's queue with their
    timeout running (a retriever window timed out behind another window on a busy CPU),
    and the client would then send the timed-out request again from scratch (hence
    ``max_retries=0`` for the embedded server). Waiting happens in the client instead.
    A CPU model may take many minutes over one long prompt on a busy machine, so its
    timeout is at least ``LOCAL_TIMEOUT_S``.
    """
    return {
        "max_in_flight": min(endpoint.max_in_flight, settings.local.parallel),
        "timeout_s": max(endpoint.timeout_s, LOCAL_TIMEOUT_S),
    }


@contextlib.asynccontextmanager
async def open_run_resources(
    settings: LinewiseSettings, tasks: list[Task], browser_config: BrowserConfig
) -> AsyncIterator[RunResources]:
    """Models (see ``open_models``), the browser and, when a task needs it, the MiniWoB
    server; torn down in reverse order."""
    async with contextlib.AsyncExitStack() as stack:
        action_client, retriever_client = await stack.enter_async_context(open_models(settings))
        browser = await stack.enter_async_context(Browser(browser_config))
        miniwob = None
        if any(isinstance(t, MiniWoBTask) for t in tasks):
            miniwob = await stack.enter_async_context(MiniWoBServer())
        yield RunResources(browser, action_client, retriever_client, miniwob)


def build_filter_factory(
    settings: LinewiseSettings, retriever_client: ChatClient | None
) -> FilterFactory:
    """The per-episode filter maker for ``settings.filter``."""
    embedder = None
    if settings.filter.name == "embedding":
        from linewise.agent.filters.embedders import make_embedder

        embedder = make_embedder(
            settings.filter.embedding_base_url,
            settings.filter.embedding_model,
            api_key=settings.action.api_key,
        )
    local_retriever = settings.retriever.base_url is None
    return filter_factory(
        settings.filter,
        retriever_client,
        retriever_context_tokens=settings.local.ctx_size if local_retriever else 32768,
        retriever_window_tokens=LOCAL_RETRIEVER_WINDOW_TOKENS if local_retriever else None,
        embedder=embedder,
    )


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


def write_run_manifest(out_dir: Path, settings: LinewiseSettings, argv: list[str]) -> None:
    """``run.json``: what was run, with which versions and settings."""
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {
        "argv": argv,
        "started_at": datetime.now().isoformat(timespec="seconds"),
        **environment_manifest(settings),
    }
    (out_dir / "run.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


async def run_tasks(
    tasks: list[Task],
    settings: LinewiseSettings,
    out_dir: Path,
    *,
    browser_config: BrowserConfig,
    argv: list[str] | None = None,
) -> list[EpisodeSummary]:
    """Run every task in order; one episode's failure never stops the others."""
    write_run_manifest(out_dir, settings, argv or sys.argv)
    summaries: list[EpisodeSummary] = []
    async with open_run_resources(settings, tasks, browser_config) as resources:
        env = EpisodeResources(resources.browser, resources.action_client, resources.miniwob)
        config = EpisodeConfig.from_settings(
            settings,
            timeout_s=settings.episode_timeout_s,
            retriever_model=resources.retriever_client.model,
            make_filter=build_filter_factory(settings, resources.retriever_client),
        )
        for task in tasks:
            summary = await run_episode(task, env, out_dir, config)
            summaries.append(summary)
            log.info(
                "episode finished",
                task_id=task.id,
                success=summary.success,
                reward=summary.reward,
                steps=summary.n_steps,
                termination=summary.termination,
                error=summary.error,
            )
    return summaries
