"""Model endpoint faults, each played by the scripted server over real HTTP: what the
chat client retries, how long it waits, what it gives up on, what it keeps, and what
``linewise run`` exits with."""

from __future__ import annotations

import asyncio
import email.utils
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from linewise.agent.models import call_model
from linewise.errors import (
    EndpointRefused,
    EndpointUnreachable,
    InvalidResponse,
    LLMError,
    infra_kind_of,
)
from linewise.records import EpisodeSummary, outcome_of
from linewise.runtime.models.chat import ChatClient, retry_after_s
from linewise.runtime.run import open_endpoints
from linewise.settings import EndpointSettings, LinewiseSettings
from linewise.testing import Fault, ScriptedChatServer, ScriptedHTTPError, miniwob_solver
from linewise.testing.json_server import RawReply, Reply

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def _client(server: ScriptedChatServer, **knobs: Any) -> ChatClient:
    settings = {"backoff_initial_s": 0.05, "backoff_max_s": 0.2, **knobs}
    return ChatClient(EndpointSettings(base_url=server.base_url, model="m", **settings))


async def test_429_with_retry_after_waits_what_the_endpoint_asked() -> None:
    with ScriptedChatServer(lambda m: "ok") as server:
        server.inject(Fault.error(429, retry_after=1))
        client = _client(server)
        started = time.perf_counter()
        completion = await client.complete(MESSAGES)
        elapsed = time.perf_counter() - started
        await client.close()
    assert completion.text == "ok" and len(server.requests) == 2
    assert 0.95 <= elapsed < 3  # the header's second, not the 0.05 s backoff


async def test_429_without_retry_after_backs_off_until_it_answers() -> None:
    with ScriptedChatServer(lambda m: "ok") as server:
        server.inject(*[Fault.error(429)] * 5)
        client = _client(server)
        completion = await client.complete(MESSAGES)
        await client.close()
    assert completion.text == "ok" and len(server.requests) == 6


async def test_retries_stop_at_the_call_budget_with_the_last_status() -> None:
    with ScriptedChatServer(lambda m: "ok") as server:
        server.inject(*[Fault.error(429)] * 100)
        client = _client(server, retry_budget_s=0.6, max_retries=100)
        started = time.perf_counter()
        with pytest.raises(LLMError) as info:
            await call_model(client, MESSAGES)
        elapsed = time.perf_counter() - started
        await client.close()
    assert info.value.status == 429 and not isinstance(info.value, EndpointRefused)
    assert elapsed < 1.5 and 3 <= len(server.requests) < 20
    assert infra_kind_of(info.value) == "model"


async def test_500s_then_success_and_the_client_does_not_retry_on_its_own() -> None:
    with ScriptedChatServer(lambda m: "ok") as server:
        server.inject(Fault.error(500), Fault.error(503), Fault.error(502))
        client = _client(server, max_retries=3)
        assert (await client.complete(MESSAGES)).text == "ok"
        assert len(server.requests) == 4
        server.inject(*[Fault.error(500)] * 10)
        with pytest.raises(LLMError) as info:
            await client.complete(MESSAGES)
        await client.close()
    assert info.value.status == 500
    assert len(server.requests) == 4 + 4  # max_retries=3: four tries, never 4 x 3


async def test_a_stall_hits_the_per_call_timeout_and_the_retry_answers() -> None:
    with ScriptedChatServer(lambda m: "ok") as server:
        server.inject(Fault.stall(5))
        client = _client(server, timeout_s=0.5)
        started = time.perf_counter()
        assert (await client.complete(MESSAGES)).text == "ok"
        assert time.perf_counter() - started < 2.5
        server.inject(Fault.stall(5))
        no_retry = _client(server, timeout_s=0.5, max_retries=0)
        with pytest.raises(LLMError, match=r"timed out after 0\.5 s"):
            await no_retry.complete(MESSAGES)
        await client.close()
        await no_retry.close()


@pytest.mark.slow
async def test_a_body_dripped_past_the_timeout_is_cut_off_at_it_and_retried() -> None:
    """The timeout is a deadline for the whole try, not for each read: the endpoint
    sends its headers, then one byte a second (every read well inside 2 s), and the try
    ends at 2 s (before, it was accepted when the last byte came, minutes later)."""
    with ScriptedChatServer(lambda m: "ok") as server:
        server.inject(Fault.drip(1.0))
        client = _client(server, timeout_s=2.0)
        started = time.perf_counter()
        completion = await asyncio.wait_for(client.complete(MESSAGES), 20)
        assert completion.text == "ok" and len(server.requests) == 2  # retried
        assert 1.9 < time.perf_counter() - started < 4
        server.inject(Fault.drip(1.0))
        no_retry = _client(server, timeout_s=2.0, max_retries=0)
        started = time.perf_counter()
        with pytest.raises(LLMError, match=r"timed out after 2 s") as info:
            await asyncio.wait_for(call_model(no_retry, MESSAGES), 20)
        assert time.perf_counter() - started < 3
        await client.close()
        await no_retry.close()
    assert info.value.call is not None and "timed out" in (info.value.call.error or "")
    assert infra_kind_of(info.value) == "model"


async def test_an_invalid_body_is_a_model_error_that_keeps_the_body() -> None:
    body = '{"id": "chatcmpl-1", "choices": [{"message": {"content": "<action>cli'
    with ScriptedChatServer(lambda m: "ok") as server:
        server.inject(Fault.invalid_body(body))
        client = _client(server)
        with pytest.raises(InvalidResponse) as info:
            await call_model(client, MESSAGES)
        await client.close()
    assert len(server.requests) == 1  # a 200 is an answer: not retried
    call = info.value.call
    assert call is not None and call.raw_body == body and call.error is not None
    assert infra_kind_of(info.value) == "model"


async def test_empty_choices_is_an_invalid_response_not_a_parse_error() -> None:
    with ScriptedChatServer(lambda m: "ok") as server:
        server.inject(Fault.empty_choices())
        client = _client(server)
        with pytest.raises(InvalidResponse, match="no choices") as info:
            await call_model(client, MESSAGES)
        await client.close()
    assert info.value.call is not None and '"choices": []' in (info.value.call.raw_body or "")


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_is_not_retried(status: int) -> None:
    with ScriptedChatServer(lambda m: "ok") as server:
        server.inject(Fault.error(status))
        client = _client(server)
        with pytest.raises(EndpointRefused) as info:
            await client.complete(MESSAGES)
        await client.close()
    assert len(server.requests) == 1 and info.value.status == status
    assert server.base_url in str(info.value) and infra_kind_of(info.value) == "refused"


async def test_an_unknown_model_is_refused_and_another_404_is_not() -> None:
    def script(messages: list[dict[str, Any]]) -> str:
        raise ScriptedHTTPError(404, "The model `m` does not exist")

    with ScriptedChatServer(script) as server:
        client = _client(server)
        with pytest.raises(EndpointRefused, match="does not know the model 'm'"):
            await client.complete(MESSAGES)
        await client.close()


async def test_a_dropped_endpoint_is_retried_until_it_is_back() -> None:
    with ScriptedChatServer(lambda m: "ok") as server:
        client = _client(server, retry_budget_s=10, backoff_max_s=0.3)
        server.go_down()
        with pytest.raises(EndpointUnreachable):
            await client.probe()
        # back up in 1 s, counted from after the probe: however slow the machine, the
        # probe met the outage and the call below must wait for its end
        server.down_for(1.0)
        started = time.perf_counter()
        assert (await client.complete(MESSAGES)).text == "ok"
        assert 0.3 < time.perf_counter() - started < 4
        await client.probe()
        await client.close()


class _ModelListFails(ScriptedChatServer):
    """Chat completions work; the model list answers ``status``."""

    def __init__(self, status: int) -> None:
        super().__init__(lambda m: "ok")
        self.status = status

    def handle(self, method: str, path: str, body: dict[str, Any]) -> Reply | RawReply:
        if method == "GET" and path.rstrip("/").endswith("/models"):
            return self.status, {"error": {"message": f"status {self.status}"}}
        return super().handle(method, path, body)


async def test_the_one_endpoint_probe_before_a_run_and_during_an_outage() -> None:
    """One probe: a 5xx from a live endpoint is an answer (a passing fault the calls'
    retries ride out) before a run and while a bench waits out an outage alike; a
    refused connection is unreachable and a refused key is refused, in both places."""
    with _ModelListFails(503) as server:
        settings = LinewiseSettings(action=EndpointSettings(base_url=server.base_url,
                                                            model="m"))
        async with open_endpoints(settings, retriever=False) as (action, _):
            assert action is not None
            await action.probe()  # as the outage watch asks
            assert (await action.complete(MESSAGES)).text == "ok"
    with _ModelListFails(401) as server:
        refused = LinewiseSettings(action=EndpointSettings(base_url=server.base_url,
                                                           model="m"))
        with pytest.raises(EndpointRefused):
            async with open_endpoints(refused, retriever=False):
                pass
    down = LinewiseSettings(action=EndpointSettings(base_url=server.base_url, model="m"))
    with pytest.raises(EndpointUnreachable):
        async with open_endpoints(down, retriever=False):
            pass


def test_retry_after_reads_seconds_dates_and_milliseconds() -> None:
    assert retry_after_s({"retry-after": "3"}) == 3.0
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 < (retry_after_s({"retry-after": date}) or 0) <= 30
    assert retry_after_s({"retry-after": "soon"}) is None and retry_after_s({}) is None


def test_endings_are_classified_in_one_place() -> None:
    assert outcome_of("task_done", None) == outcome_of("max_steps", None) == "agent"
    assert outcome_of("error", None) == "agent"  # e.g. answers that never parsed
    assert outcome_of("error", "model") == "infrastructure"
    assert outcome_of("timeout", None) == "infrastructure"
    summary = EpisodeSummary(episode_id="e", task_id="t")
    summary.mark_failed("error", "EndpointUnreachable: down", None,
                        infra_kind_of(EndpointUnreachable("http://x")))
    assert summary.outcome == "infrastructure" and summary.infra_kind == "model"
    assert '"outcome":"infrastructure"' in summary.model_dump_json()


# ------------------------------------------------------------------ linewise run exit codes

TASKS = """\
tasks:
  - miniwob: click-test
    seed: 1
    max_steps: 2
  - miniwob: click-test
    seed: 2
    max_steps: 2
"""


def _run(tmp_path: Path, base_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    return subprocess.run(
        [sys.executable, "-m", "linewise.cli.main", "run", str(tasks), "--out",
         str(tmp_path / "out"), "--base-url", base_url, "--model", "scripted",
         "--no-screenshots", "--log-level", "WARNING", *extra],
        capture_output=True, text=True, timeout=120, env=env,
    )


@pytest.mark.slow
def test_run_exits_0_on_agent_outcomes_and_4_on_infrastructure(tmp_path: Path) -> None:
    with ScriptedChatServer(miniwob_solver) as server:
        ok = _run(tmp_path, server.base_url)
        assert ok.returncode == 0, ok.stderr[-2000:]
        server.inject(Fault.error(500))  # the first task's first call; no retry budget
        infra = _run(tmp_path, server.base_url, "--retry-budget", "0")
    assert infra.returncode == 4, infra.stderr[-2000:]
    assert "1 ended on an infrastructure fault (model)" in infra.stdout
    assert "1/1 succeeded" in infra.stdout


@pytest.mark.slow
def test_run_stops_at_once_on_a_refused_key_with_exit_3(tmp_path: Path) -> None:
    def script(messages: list[dict[str, Any]]) -> str:
        raise ScriptedHTTPError(401, "invalid api key")

    with ScriptedChatServer(script) as server:
        refused = _run(tmp_path, server.base_url)
        assert len(server.requests) == 1  # the second task never asked
    assert refused.returncode == 3, refused.stderr[-2000:]
    assert f"LLM endpoint {server.base_url} refused the API key (401)" in refused.stderr


@pytest.mark.slow
def test_run_exits_3_when_nothing_answers_and_2_for_bad_input(tmp_path: Path) -> None:
    unreachable = _run(tmp_path, "http://127.0.0.1:9/v1")
    assert unreachable.returncode == 3 and "127.0.0.1:9" in unreachable.stderr
    bad = _run(tmp_path, "http://127.0.0.1:9/v1", "--task", "no-such-task")
    assert bad.returncode == 2, bad.stderr[-2000:]
