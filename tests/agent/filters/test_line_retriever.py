"""LineRetriever against a scripted model behind a real chat-completions server."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.line_retriever import LineRetrieverConfig, LineRetrieverFilter
from linewise.runtime.models.chat import ChatClient
from linewise.settings import EndpointSettings
from linewise.testing import ScriptedChatServer, ScriptedHTTPError
from tests.support.concurrency import InFlight
from tests.support.paths import TREES

NO_GATE = {"cost_gate": False, "json_schema": "off", "pad_lines": 0}


def lines_of(name: str) -> list[str]:
    return (TREES / name).read_text().splitlines()


def line_numbers_matching(prompt: str, pattern: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(rf"^(\d+)\|.*{pattern}", prompt, re.MULTILINE)]


def client(server: ScriptedChatServer) -> ChatClient:
    return ChatClient(EndpointSettings(base_url=server.base_url, model="retriever"))


def anne_picker(messages: list[dict[str, Any]]) -> str:
    numbers = line_numbers_matching(messages[-1]["content"], "Anne")
    pairs = ", ".join(f"({n}, {n + 3})" for n in numbers)
    return f"<think>The emails by Anne.</think>\n<answer>[{pairs}]</answer>"


async def test_structure_view_of_the_email_inbox() -> None:
    lines = lines_of("miniwob-email-inbox.txt")
    goal = "Find the email by Anne and click the star icon to mark it as important."
    with ScriptedChatServer(anne_picker) as server:
        flt = LineRetrieverFilter(client(server), LineRetrieverConfig(**NO_GATE))
        result = await flt.apply(FilterInput(goal=goal, lines=lines, focused_bid=""))
    prompt = server.requests[0]["messages"][1]["content"]
    assert "# Goal:\n" + goal in prompt and "1|RootWebArea" in prompt
    assert "(no action yet)" in prompt
    anne = [i for i, line in enumerate(lines) if "Anne" in line]
    assert anne and all(lines[i] in result.text for i in anne)
    assert result.name == "lines+structure" and result.fallback_reason is None
    assert result.ranges and result.calls[0].purpose == "retriever"
    assert 0.3 < result.reduction < 1
    assert result.text.splitlines()[0].startswith("RootWebArea")


async def test_lines_mode_keeps_lines_verbatim_with_counted_markers() -> None:
    lines = lines_of("miniwob-email-inbox.txt")
    with ScriptedChatServer(lambda m: "<answer>[(3, 5), (10, 10)]</answer>") as server:
        flt = LineRetrieverFilter(
            client(server), LineRetrieverConfig(structure=False, **NO_GATE))
        result = await flt.apply(FilterInput(goal="g", lines=lines))
    out = result.text.splitlines()
    assert [line for line in out if "omitted" not in line] == [lines[i - 1] for i in (3, 4, 5, 10)]
    omitted = sum(int(re.search(r"(\d+) lines? omitted", line).group(1))  # type: ignore[union-attr]
                  for line in out if "omitted" in line)
    assert omitted == len(lines) - 4


async def test_malformed_answer_is_retried_with_the_error() -> None:
    answers = iter(["I would keep the inbox.", "<answer>[(2, 4)]</answer>"])
    with ScriptedChatServer(lambda m: next(answers)) as server:
        flt = LineRetrieverFilter(client(server), LineRetrieverConfig(**NO_GATE))
        result = await flt.apply(FilterInput(goal="g", lines=lines_of("miniwob-email-inbox.txt")))
    assert len(result.calls) == 2 and result.fallback_reason is None
    retry = server.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "I would keep the inbox."}
    assert "no line numbers" in retry[-1]["content"]
    assert result.ranges[0][0] <= 2


async def test_fallback_to_the_full_tree_when_retries_run_out() -> None:
    lines = lines_of("miniwob-social-media.txt")
    with ScriptedChatServer(lambda m: "<think>hmm") as server:
        flt = LineRetrieverFilter(client(server), LineRetrieverConfig(max_retries=1, **NO_GATE))
        result = await flt.apply(FilterInput(goal="g", lines=lines))
    assert result.text == "\n".join(lines) and result.reduction == 0
    assert result.fallback_reason and "after 2 tries" in result.fallback_reason
    assert len(server.requests) == 2


async def test_json_schema_when_supported_and_tags_when_refused() -> None:
    def schema_server(messages: list[dict[str, Any]]) -> str:
        return '{"think": "first lines", "ranges": [[1, 4]]}'

    lines = lines_of("miniwob-email-inbox.txt")
    with ScriptedChatServer(schema_server) as server:
        flt = LineRetrieverFilter(client(server), LineRetrieverConfig(cost_gate=False))
        result = await flt.apply(FilterInput(goal="g", lines=lines))
    request = server.requests[0]
    assert request["response_format"]["type"] == "json_schema"
    assert '"ranges"' in request["messages"][1]["content"]  # the prompt asks for JSON
    assert result.kept_lines[:4] == [1, 2, 3, 4]

    calls: list[dict[str, Any]] = []

    def refusing(messages: list[dict[str, Any]]) -> str:
        calls.append(messages[-1])
        if len(calls) == 1:
            raise ScriptedHTTPError(400, "response_format json_schema is not supported")
        return "<think>ok</think><answer>[(1, 2)]</answer>"

    with ScriptedChatServer(refusing) as server:
        flt = LineRetrieverFilter(client(server), LineRetrieverConfig(cost_gate=False))
        result = await flt.apply(FilterInput(goal="g", lines=lines))
        assert "response_format" not in server.requests[1]
        assert "<answer>" in server.requests[1]["messages"][1]["content"]
    assert result.fallback_reason is None and result.kept_lines[:2] == [1, 2]


@pytest.mark.slow
async def test_windows_are_queried_concurrently_and_merged() -> None:
    lines = lines_of("docs-functions.txt")

    probe = InFlight()

    def pick_first_heading(messages: list[dict[str, Any]]) -> str:
        with probe.track():
            time.sleep(0.3)
        numbers = [int(n) for n in re.findall(r"^(\d+)\|", messages[-1]["content"], re.MULTILINE)]
        return f"<answer>[({numbers[0]}, {numbers[0] + 1})]</answer>"

    with ScriptedChatServer(pick_first_heading) as server:
        config = LineRetrieverConfig(context_tokens=8192, answer_tokens=256, **NO_GATE)
        flt = LineRetrieverFilter(client(server), config)
        result = await flt.apply(FilterInput(goal="Find the docs of zip()", lines=lines))
    windows = result.notes["windows"]
    assert isinstance(windows, int) and windows == len(server.requests) > 3
    prompts = [r["messages"][1]["content"] for r in server.requests]  # arrival order varies
    assert sum("you see only lines 1 to" in p for p in prompts) == 1
    assert all("you see only lines" in p for p in prompts)
    aliases = result.notes["bid_aliases"]
    assert isinstance(aliases, int)
    # one range per window, merged in order, plus lines whose bid equals a chosen number
    assert windows <= len(result.ranges) <= windows + aliases
    assert probe.peak > 1  # windows were asked concurrently (the client allows 4 in flight)
    assert result.reduction > 0.9


async def test_incremental_retrieval_asks_only_about_changed_lines() -> None:
    lines = lines_of("miniwob-email-inbox.txt")
    with ScriptedChatServer(anne_picker) as server:
        flt = LineRetrieverFilter(client(server), LineRetrieverConfig(**NO_GATE))
        first = await flt.apply(FilterInput(goal="Anne", lines=lines))
        changed = list(lines)
        changed[5] = changed[5] + " (changed by Anne)"
        history = ["click('20')"]
        second = await flt.apply(FilterInput(goal="Anne", lines=changed, history=history))
        history.append("scroll(0, 200)")
        third = await flt.apply(FilterInput(goal="Anne", lines=changed, history=history))
        history.append("noop()")
        stuck = await flt.apply(FilterInput(goal="Anne", lines=changed, history=history))
    assert len(server.requests) == 2  # the unchanged third step needs no call
    prompt = server.requests[1]["messages"][1]["content"]
    assert "Only the lines that changed" in prompt
    assert prompt.count("\n6|") == 1 and "\n7|" not in prompt
    assert set(first.kept_lines) - {6} <= set(second.kept_lines)
    assert 6 in second.kept_lines
    assert second.notes["incremental"]["used"] is True  # type: ignore[index]
    assert third.kept_lines == second.kept_lines and not third.calls
    # a noop on that unchanged page: the same selection is not served again
    assert stuck.notes["escalation"]["reasons"] == ["noop"]  # type: ignore[index]
    assert stuck.reduction == 0 and len(stuck.kept_lines) == len(changed)


async def test_cost_gate_skips_small_observations() -> None:
    with ScriptedChatServer(anne_picker) as server:
        flt = LineRetrieverFilter(client(server), LineRetrieverConfig(json_schema="off"))
        result = await flt.apply(FilterInput(goal="g", lines=lines_of("miniwob-book-flight.txt")))
    assert not server.requests and result.reduction == 0
    gate = result.notes["cost_gate"]
    assert isinstance(gate, dict) and gate["retrieve"] is False and "too small" in gate["reason"]


async def test_recall_guard_adds_what_the_retriever_dropped() -> None:
    lines = lines_of("miniwob-book-flight.txt")
    with ScriptedChatServer(lambda m: "<answer>[(1, 1)]</answer>") as server:
        flt = LineRetrieverFilter(client(server), LineRetrieverConfig(**NO_GATE))
        result = await flt.apply(FilterInput(
            goal="g", lines=lines, focused_bid="24", must_keep_bids=["32"]))
    assert "[24] textbox 'From:'" in result.text and "[32] button 'Search'" in result.text
    assert result.notes["guarded_bids"] == ["24", "32"]


async def test_chosen_ranges_are_padded_against_off_by_one_answers() -> None:
    lines = lines_of("miniwob-email-inbox.txt")
    with ScriptedChatServer(lambda m: "<answer>[(10, 10)]</answer>") as server:
        config = LineRetrieverConfig(cost_gate=False, json_schema="off", pad_lines=1,
                                     structure=False)
        result = await LineRetrieverFilter(client(server), config).apply(
            FilterInput(goal="g", lines=lines))
    assert result.kept_lines == [9, 10, 11] and result.ranges == [(10, 10)]


async def test_numbers_that_name_a_bid_keep_that_element() -> None:
    lines = lines_of("miniwob-email-inbox.txt")
    assert len(lines) < 90  # so 90 can only be the bid, not a line number
    sender = next(i + 1 for i, line in enumerate(lines) if "[90] generic" in line)

    def answer_with_a_bid(messages: list[dict[str, Any]]) -> str:
        return "<think>The email is element [90].</think><answer>[(90, 90)]</answer>"

    with ScriptedChatServer(answer_with_a_bid) as server:
        flt = LineRetrieverFilter(client(server), LineRetrieverConfig(**NO_GATE))
        result = await flt.apply(FilterInput(goal="Open the email", lines=lines))
    assert len(server.requests) == 1  # read as a bid, not retried as out of range
    assert result.fallback_reason is None
    assert sender in result.kept_lines and "[90] generic" in result.text
    assert result.notes["bid_aliases"] == 1


def _window_of(messages: list[dict[str, Any]]) -> list[int]:
    return [int(n) for n in re.findall(r"^(\d+)\|", messages[1]["content"], re.MULTILINE)]


async def test_a_window_may_hold_nothing_and_a_failed_window_is_shown_whole() -> None:
    lines = lines_of("docs-functions.txt")
    first_lines: list[int] = []

    def answer(messages: list[dict[str, Any]]) -> str:
        numbers = _window_of(messages)
        if numbers[0] == 1:  # the first window: a real selection
            first_lines.extend(numbers)
            return "<answer>[(2, 3)]</answer>"
        if "you see only lines" in messages[1]["content"] and numbers[-1] == len(lines):
            return "I cannot tell."  # the last window never gives ranges
        return '<think>Nothing for the goal here.</think><answer>[]</answer>'

    with ScriptedChatServer(answer) as server:
        config = LineRetrieverConfig(context_tokens=8192, answer_tokens=256, **NO_GATE)
        flt = LineRetrieverFilter(client(server), config)
        result = await flt.apply(FilterInput(goal="Find the docs of zip()", lines=lines))
    windows = result.notes["windows"]
    assert isinstance(windows, int) and windows > 3
    assert result.fallback_reason is None
    failed = result.notes["window_fallbacks"]
    assert isinstance(failed, list) and len(failed) == 1 and "no usable ranges" in failed[0]
    last_window_start = result.ranges[-1][0]
    assert result.ranges[-1][1] == len(lines)  # the failed last window, whole
    assert result.ranges[0] == (2, 3)  # the first window's choice; empty windows add nothing
    assert len(result.ranges) == 2
    assert len(server.requests) == windows + 2  # only the failing window was asked again
    assert last_window_start > len(first_lines)


async def test_no_line_in_any_window_falls_back_to_the_full_tree() -> None:
    lines = lines_of("docs-functions.txt")
    with ScriptedChatServer(lambda _m: '{"think": "none", "ranges": []}') as server:
        config = LineRetrieverConfig(context_tokens=8192, answer_tokens=256, **NO_GATE)
        result = await LineRetrieverFilter(client(server), config).apply(
            FilterInput(goal="Find the docs of zip()", lines=lines))
    assert result.fallback_reason == "the retriever kept no line in any window"
    assert result.text == "\n".join(lines)
