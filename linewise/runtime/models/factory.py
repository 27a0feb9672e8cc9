"""The one factory of model clients: every command opens its chat endpoints here.

``open_endpoints`` is how ``run``, ``bench`` (the local backend, and the Ray driver,
whose workers open the endpoints it hands on), ``filter-eval``, ``prune`` and the
retriever's dataset open their chat models: it starts the embedded model when an
endpoint has no URL, probes every endpoint once, resolves each endpoint's profile once
from the settings and what the probe said (``profiles.resolve_profile``), and builds one
``ChatClient`` per distinct endpoint. ``chat_client`` builds one more client the same
way (the pruner's extractor on an endpoint of its own). Embedding clients come from
``embedder_for`` (``agent.text.embedders``), which every embedding user calls with
the run's settings; both kinds of client try a request the same way
(``agent.transport``): one retry policy, one mapping of endpoint faults to errors.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import structlog

from linewise.agent.profile import DEFAULT_PROFILE
from linewise.agent.text.embedders import embedder_for
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.models.files import resolve_model_path
from linewise.runtime.models.local_server import LocalModelServer
from linewise.runtime.models.profiles import EMBEDDED, resolve_profile
from linewise.settings import LOCAL_TIMEOUT_S, EndpointSettings, LinewiseSettings

__all__ = ["LOCAL_TIMEOUT_S", "chat_client", "embedder_for", "open_endpoints", "open_models"]

log = structlog.get_logger(__name__)


def chat_client(endpoint: EndpointSettings, settings: LinewiseSettings | None = None, *,
                served_by: str | None = None) -> ChatClient:
    """A client of ``endpoint`` whose profile is resolved from ``settings`` (their local
    server's group; its defaults without them) and ``served_by`` (the owner its probe
    named). The caller closes it."""
    profile = resolve_profile(endpoint, local=settings.local if settings is not None else None,
                              served_by=served_by)
    return ChatClient(endpoint, profile=profile)


async def probe_endpoint(endpoint: EndpointSettings) -> str | None:
    """``ChatClient.probe`` of an endpoint before its client is built (its profile
    depends on the answer)."""
    client = ChatClient(endpoint, profile=DEFAULT_PROFILE)
    try:
        return await client.probe()
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def open_endpoints(
    settings: LinewiseSettings, *, action: bool = True, retriever: bool = True
) -> AsyncIterator[tuple[ChatClient | None, ChatClient | None]]:
    """Clients for the endpoints asked for (the others are None): the embedded model
    server is started when an asked-for endpoint has no URL, and every endpoint is
    checked before anything runs. Two roles on equal endpoints share one client (and
    so one profile and one memory of refusals)."""
    async with contextlib.AsyncExitStack() as stack:
        wanted = [e for e, asked in ((settings.action, action), (settings.retriever, retriever))
                  if asked]
        served: dict[str, object] = {}
        if any(e.base_url is None for e in wanted):
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

        def endpoint(settings_of: EndpointSettings) -> EndpointSettings:
            if settings_of.base_url is not None:
                return settings_of
            return settings_of.model_copy(update={
                **served, **_local_slots(settings_of, settings),
                "context_tokens": settings_of.context_tokens or settings.local.ctx_size,
                # named, so that whoever gets this endpoint resolves the same profile
                "profile": EMBEDDED if settings_of.profile == "auto" else settings_of.profile,
            })

        clients: dict[EndpointSettings, ChatClient] = {}
        owners: dict[str, str | None] = {}

        async def client_of(settings_of: EndpointSettings) -> ChatClient:
            opened = endpoint(settings_of)
            if opened not in clients:
                assert opened.base_url is not None
                if opened.base_url not in owners:  # one probe per server
                    owners[opened.base_url] = await probe_endpoint(opened)
                client = chat_client(opened, settings, served_by=owners[opened.base_url])
                stack.push_async_callback(client.close)
                clients[opened] = client
            return clients[opened]

        action_client = await client_of(settings.action) if action else None
        retriever_client = await client_of(settings.retriever) if retriever else None
        yield action_client, retriever_client


@contextlib.asynccontextmanager
async def open_models(settings: LinewiseSettings) -> AsyncIterator[tuple[ChatClient, ChatClient]]:
    """The action and retriever clients (see ``open_endpoints``)."""
    async with open_endpoints(settings) as (action, retriever):
        assert action is not None and retriever is not None
        yield action, retriever


def _local_slots(endpoint: EndpointSettings, settings: LinewiseSettings) -> dict[str, float]:
    """The embedded server works on ``parallel`` requests at once; so may the client.

    More requests in flight than slots would wait in the server's queue with their
    timeout running (a retriever window timed out behind another window on a busy CPU),
    and the client would then send the timed-out request again from scratch (hence
    ``max_retries=0`` for the embedded server). Waiting happens in the client instead.
    A CPU model may take many minutes over one long prompt on a busy machine, so its
    timeout is at least ``LOCAL_TIMEOUT_S``, where a remote endpoint's default
    (``EndpointSettings.timeout_s``) is much shorter.
    """
    return {
        "max_in_flight": min(endpoint.max_in_flight, settings.local.parallel),
        "timeout_s": max(endpoint.timeout_s, LOCAL_TIMEOUT_S),
    }
