"""One structured-ask path for every caller: constraint negotiation remembered per model,
re-asks with the problem shown, bounded conversations and spending checks."""

from __future__ import annotations

import json
from typing import Any

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.stages.query_expansion import QueryExpander
from linewise.agent.structured import Constraint, ask_structured, supports
from linewise.errors import ResponseFormatError
from linewise.runtime.models.chat import ChatClient
from linewise.settings import EndpointSettings
from linewise.testing import ScriptedChatServer, ScriptedHTTPError

SCHEMA = Constraint.json_schema("number", {"type": "object", "properties": {
    "n": {"type": "integer"}}, "required": ["n"]})


def read_number(text: str) -> int:
    try:
        return int(json.loads(text)["n"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ResponseFormatError(f"not a number object: {text[:20]!r}") from exc


def ask(model: ChatClient, **knobs: Any) -> Any:
    return ask_structured(
        model, lambda constrained: [{"role": "user", "content": f"json={constrained}"}],
        read_number, constraint=SCHEMA,
        reask=lambda error, _text: {"role": "user", "content": f"again: {error}"}, **knobs)


async def test_a_refused_schema_is_remembered_for_the_model_by_every_caller() -> None:
    def refusing(messages: list[dict[str, Any]]) -> str:
        if messages[-1]["content"] == "json=True":
            raise ScriptedHTTPError(400, "response_format is not supported")
        return '{"n": 7}' if "json=False" in messages[-1]["content"] else '{"terms": ["x"]}'

    with ScriptedChatServer(refusing) as server:
        model = ChatClient(EndpointSettings(base_url=server.base_url, model="m"))
        first = await ask(model, retries=1)
        assert first.value == 7 and first.refused and not first.constrained
        assert len(first.calls) == 2 and first.calls[0].error  # the refusal is recorded
        assert not supports(model, "json_schema") and supports(model, "grammar")
        # another caller of the same model no longer sends a schema
        await QueryExpander(model).expand(FilterInput(goal="g", lines=["RootWebArea 'x'"]))
        assert "response_format" not in server.requests[-1]
        # mode "on" insists, and its refusal is the call's failure
        on = await ask(model, retries=1, mode="on")
        assert on.value is None and on.failure is not None and on.failure.status == 400
    assert ["response_format" in r for r in server.requests] == [True, False, False, True]


async def test_re_asks_show_the_problem_keep_the_last_exchange_and_stop_when_told() -> None:
    answers = iter(["nope", "still no", '{"n": 3}'])
    with ScriptedChatServer(lambda _messages: next(answers)) as server:
        model = ChatClient(EndpointSettings(base_url=server.base_url, model="m"))
        result = await ask(model, retries=2, history="last", mode="off",
                           reask_params={"temperature": 0.9})
        assert result.value == 3 and [c.attempt for c in result.calls] == [0, 1, 2]
        third = server.requests[2]["messages"]
        assert len(third) == 3 and third[1]["content"] == "still no"  # only the latest
        assert "again: not a number object: 'still no'" in third[2]["content"]
        assert [r["temperature"] for r in server.requests] == [0.0, 0.9, 0.9]

    with ScriptedChatServer(lambda _messages: "never") as server:
        model = ChatClient(EndpointSettings(base_url=server.base_url, model="m"))
        stopped = await ask(model, retries=5, mode="off",
                            may_reask=lambda calls: "limit" if len(calls) >= 2 else None)
        assert stopped.value is None and stopped.stopped == "limit"
        assert len(server.requests) == 2 and "not a number" in (stopped.error or "")
        # history "all" keeps every exchange
        grown = await ask(model, retries=2, mode="off")
        assert [len(r["messages"]) for r in server.requests[2:]] == [1, 3, 5]
        assert grown.value is None
