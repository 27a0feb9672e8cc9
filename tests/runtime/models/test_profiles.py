"""Model profiles: each endpoint's is resolved once, from its settings and its probe;
the client sends constraints in the fields its profile names and keeps its own
refusals; the sizes it gives are the ones the settings gave before profiles."""

from __future__ import annotations

import os
from typing import Any

import pytest

from linewise.agent.constraint import Constraint
from linewise.agent.profile import DEFAULT_PROFILE, profile_of
from linewise.agent.structured import ask_structured, supports
from linewise.agent.text.embedders import OpenAIEmbedder
from linewise.errors import ConfigError, EndpointRefused, LLMError
from linewise.runtime.filter_choice import filter_context
from linewise.runtime.models import factory
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.models.factory import open_endpoints
from linewise.runtime.models.profiles import PROFILES, resolve_profile
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import FunctionModel, ScriptedChatServer
from linewise.testing.json_server import JSONServer, Reply

GRAMMAR = Constraint.gbnf("answer", 'root ::= "yes"')
SCHEMA = Constraint.json_schema("answer", {"type": "object"})


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "LINEWISE_")):
            monkeypatch.delenv(name)


def _client(server: ScriptedChatServer, profile: str = "auto") -> ChatClient:
    return ChatClient(EndpointSettings(base_url=server.base_url, model=server.model,
                                       profile=profile))


async def _ask(model: Any, constraint: Constraint) -> Any:
    return await ask_structured(
        model, lambda _constrained: [{"role": "user", "content": "yes?"}], lambda text: text,
        constraint=constraint, retries=0,
        reask=lambda error, _text: {"role": "user", "content": error})


async def test_a_vllm_endpoint_is_sent_the_grammar_in_guided_grammar() -> None:
    with ScriptedChatServer(lambda _messages: "yes") as server:
        client = _client(server, "vllm")
        assert (await _ask(client, GRAMMAR)).constrained
        await _ask(client, SCHEMA)
        await client.close()
    grammar, schema = server.requests
    assert grammar["guided_grammar"] == GRAMMAR.grammar and "grammar" not in grammar
    assert schema["response_format"]["json_schema"]["name"] == "answer"


@pytest.mark.parametrize(("owned_by", "name", "field"), [
    ("vllm", "vllm", "guided_grammar"), ("llamacpp", "llama.cpp", "grammar"),
    ("someone", "openai-compatible", "grammar")])
async def test_auto_takes_the_server_its_model_list_names(owned_by: str, name: str,
                                                          field: str) -> None:
    with ScriptedChatServer(lambda _messages: "yes", owned_by=owned_by) as server:
        settings = LinewiseSettings(action=EndpointSettings(base_url=server.base_url,
                                                            model=server.model))
        async with open_endpoints(settings, retriever=False) as (action, _):
            assert action is not None and action.profile.name == name
            await _ask(action, GRAMMAR)
    assert server.requests[0][field] == GRAMMAR.grammar


async def test_the_setting_wins_over_the_model_list() -> None:
    with ScriptedChatServer(lambda _messages: "yes", owned_by="vllm") as server:
        settings = LinewiseSettings(action=EndpointSettings(
            base_url=server.base_url, model=server.model, profile="llama.cpp"))
        async with open_endpoints(settings, retriever=False) as (action, _):
            assert action is not None and action.profile.name == "llama.cpp"


async def test_openai_is_sent_schemas_in_response_format_and_never_a_grammar() -> None:
    with ScriptedChatServer(lambda _messages: "yes") as server:
        client = _client(server, "openai")
        schema = await _ask(client, SCHEMA)
        grammar = await _ask(client, GRAMMAR)
        await client.close()
    assert schema.constrained and not grammar.constrained and not grammar.refused
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    assert not any(key in server.requests[1] for key in ("grammar", "guided_grammar",
                                                          "response_format"))
    assert not supports(client, "grammar") and supports(client, "json_schema")


def test_a_profile_may_send_schemas_in_vllms_guided_json() -> None:
    guided = PROFILES["vllm"].replace(json_schema_field="guided_json")
    params = guided.with_constraint({"extra_body": {"top_k": 1}}, SCHEMA)
    assert params == {"extra_body": {"top_k": 1, "guided_json": {"type": "object"}}}


async def test_refusals_are_remembered_by_each_client_not_shared() -> None:
    with ScriptedChatServer(lambda _messages: "yes", refuse_grammar=True) as server:
        first, second = _client(server), _client(server)
        refused = await _ask(first, GRAMMAR)
        again = await _ask(first, GRAMMAR)
        other = await _ask(second, GRAMMAR)
        for client in (first, second):
            await client.close()
    assert refused.refused and refused.value == "yes" and not again.constrained
    assert other.refused  # the second client asked under the grammar: nothing shared
    assert ["grammar" in r for r in server.requests] == [True, False, False, True, False]
    assert first.refused_constraints == second.refused_constraints == {"grammar"}
    model = FunctionModel(lambda _messages, _info: "yes")
    assert supports(model, "grammar")  # in-process models keep their own too


async def test_one_endpoint_is_probed_and_profiled_once_for_both_roles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolved: list[EndpointSettings] = []

    def counting(endpoint: EndpointSettings, **knobs: Any) -> Any:
        resolved.append(endpoint)
        return resolve_profile(endpoint, **knobs)

    monkeypatch.setattr(factory, "resolve_profile", counting)
    with ScriptedChatServer(lambda _messages: "yes") as server:
        settings = LinewiseSettings(action=EndpointSettings(
            base_url=server.base_url, model=server.model)).resolved()
        async with open_endpoints(settings) as (action, retriever):
            assert action is retriever and action is not None
        other = settings.model_copy(update={"retriever": settings.retriever.model_copy(
            update={"model": "small"})})
        async with open_endpoints(other) as (action, retriever):
            assert action is not retriever  # two models on one server: two profiles
    assert len(resolved) == 3
    assert [path for method, path, _ in server.calls if method == "GET"] == ["/v1/models"] * 2


@pytest.mark.parametrize("knobs", [
    {}, {"local": {"ctx_size": 4096}}, {"agent": {"view_budget_tokens": 1200}},
    {"filter": {"retriever_context_tokens": 9000, "retriever_window_tokens": 700}},
    {"local": {"ctx_size": 8192, "retriever_window_tokens": 1024},
     "action": {"context_tokens": 6000}}])
def test_the_profiles_sizes_are_the_ones_the_settings_gave(knobs: dict[str, Any]) -> None:
    settings = LinewiseSettings(**knobs)
    for local in (True, False):
        endpoint = settings.action.model_copy(update={
            "base_url": "http://127.0.0.1:9/v1", "model": "m",
            "profile": "embedded" if local else "auto",
            # what the factory writes into the endpoint of the embedded server
            "context_tokens": settings.action.context_tokens
            or (settings.local.ctx_size if local else None)})
        client = ChatClient(endpoint, profile=resolve_profile(endpoint, local=settings.local))
        context = filter_context(settings, client, action_profile=client.profile)
        assert context.view_budget_tokens == settings.view_budget_tokens(local=local)
        assert context.retriever_window_tokens == settings.retriever_window_tokens(local=local)
        if not settings.action.context_tokens:  # the action endpoint's, not the retriever's
            assert (context.retriever_context_tokens
                    == settings.retriever_context_tokens(local=local))
        assert client.profile.grammar_by_default is local and client.embedded is local


def test_models_without_a_profile_are_asked_in_the_protocols_terms() -> None:
    model = FunctionModel(lambda _messages, _info: "yes")
    assert profile_of(model) is DEFAULT_PROFILE and profile_of(None) is DEFAULT_PROFILE
    assert DEFAULT_PROFILE.request_params(GRAMMAR) == {"extra_body": {"grammar": 'root ::= "yes"'}}

    class Stated:
        model = "stated"
        context_tokens = 1_000_000

    assert profile_of(Stated()).context_tokens == 1_000_000


def test_an_unknown_profile_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="unknown model profile 'sglang'"):
        resolve_profile(EndpointSettings(base_url="http://127.0.0.1:9/v1", profile="sglang"))


class _Embeddings(JSONServer):
    """``POST /v1/embeddings`` answering ``statuses`` first, then one vector per input."""

    def __init__(self, *statuses: int) -> None:
        super().__init__()
        self.statuses = list(statuses)

    def handle(self, method: str, path: str, body: dict[str, Any]) -> Reply:
        if self.statuses:
            return self.statuses.pop(0), {"error": {"message": "not now"}}
        return 200, {"object": "list", "model": body["model"], "data": [
            {"object": "embedding", "index": i, "embedding": [1.0, 0.0]}
            for i, _ in enumerate(body["input"])]}


async def test_the_embedding_client_tries_and_fails_as_the_chat_client_does() -> None:
    knobs = EndpointSettings(backoff_initial_s=0.01, backoff_max_s=0.02)
    with _Embeddings(503, 429) as server:
        embedder = OpenAIEmbedder(base_url=server.base_url, api_key="k", endpoint=knobs)
        assert (await embedder.embed(["a", "b"])).shape == (2, 2)  # two passing faults
        await embedder.close()
    assert len(server.calls) == 3
    with _Embeddings(401) as server:
        embedder = OpenAIEmbedder(base_url=server.base_url, api_key="k", endpoint=knobs)
        with pytest.raises(EndpointRefused):
            await embedder.embed(["a"])
        await embedder.close()
    assert len(server.calls) == 1  # a refused key is not tried again
    with _Embeddings(400) as server:
        embedder = OpenAIEmbedder(base_url=server.base_url, api_key="k", endpoint=knobs)
        with pytest.raises(LLMError, match=r"Embedding endpoint .* answered 400") as failure:
            await embedder.embed(["a"])
        await embedder.close()
    assert failure.value.status == 400


async def test_the_embedded_endpoint_names_its_profile_for_whoever_opens_it_next(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
) -> None:
    """No base URL: the factory starts the local server (played here by a scripted one)
    and hands on an endpoint that says it is the embedded model, as the Ray driver
    hands it to its workers."""
    with ScriptedChatServer(lambda _messages: "yes", owned_by="llamacpp") as llm:

        class Served:
            base_url, model_name = llm.base_url, llm.model

            def __init__(self, *_args: Any, **_knobs: Any) -> None:
                pass

            async def __aenter__(self) -> Served:
                return self

            async def __aexit__(self, *_exc: object) -> None:
                pass

        monkeypatch.setattr(factory, "LocalModelServer", Served)
        monkeypatch.setattr(factory, "resolve_model_path", lambda _path: tmp_path / "m.gguf")
        settings = LinewiseSettings(local={"ctx_size": 8192}).resolved()
        async with open_endpoints(settings) as (action, retriever):
            assert action is not None and action is retriever
            assert action.profile == resolve_profile(action.endpoint, local=settings.local)
            assert action.profile.name == "embedded" and action.context_tokens == 8192
            assert action.endpoint.max_retries == 0
            handed_on = settings.model_copy(update={
                "action": action.endpoint, "retriever": retriever.endpoint})
        async with open_endpoints(handed_on) as (worker, _):
            assert worker is not None and worker.profile == action.profile
