"""Answering from the reasoning: a question goal whose reasoning states the answer is
answered, with words that must be on the page; other goals and other actions are not
touched. Scripted models behind a real HTTP server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from linewise.agent.answer_check import asks_a_question, grounded
from linewise.agent.page_view import page_key
from linewise.agent.policy import ActionAgent
from linewise.agent.prompt import PageView
from linewise.runtime.models.chat import ChatClient
from linewise.settings import AgentSettings, EndpointSettings
from linewise.testing import ScriptedChatServer

PAGE = [
    "RootWebArea 'socket'",
    "\t[681] heading 'Socket families'",
    "\t[700] term 'socket.shutdown(how)'",
    "\t\tStaticText 'Shut down one or both halves of the connection. If how is SHUT_RDWR, "
    "further sends and receives are disallowed.'",
    "\t[705] link 'socket.close()'",
]
QUESTION = ("Which value of the how argument of socket.shutdown() disallows both further "
            "sends and receives? Tell me the constant.")
CLICK = ("<think>The SHUT_RDWR constant is the one that disallows both sends and "
         "receives.</think><action>click('681')</action>")


def _view() -> PageView:
    return PageView(url="http://docs/socket.html", text="\n".join(PAGE),
                    page_key=page_key("http://docs/socket.html", PAGE))


def _is_check(messages: list[dict[str, Any]]) -> bool:
    return "Does this reasoning already state the answer" in messages[-1]["content"]


def _model(check_answer: str | None, action: str = CLICK):
    def reply(messages: list[dict[str, Any]]) -> str:
        return json.dumps({"answer": check_answer}) if _is_check(messages) else action
    return reply


async def _decide(server: ScriptedChatServer, goal: str = QUESTION, *,
                  embedded: bool = False, **knobs: Any):
    agent = ActionAgent(ChatClient(EndpointSettings(base_url=server.base_url,
                                                    model=server.model), embedded=embedded),
                        AgentSettings(**{"answer_check": "on", **knobs}))
    return await agent.decide(goal, _view())


async def test_auto_checks_the_embedded_model_and_leaves_an_endpoints_alone() -> None:
    with ScriptedChatServer(_model("SHUT_RDWR")) as llm:
        decision = await _decide(llm, answer_check="auto")
    assert str(decision.action) == "click('681')" and len(llm.requests) == 1
    with ScriptedChatServer(_model("SHUT_RDWR")) as llm:
        decision = await _decide(llm, answer_check="auto", embedded=True)
    assert str(decision.action) == "send_msg_to_user('SHUT_RDWR')"


async def test_an_answer_the_reasoning_states_is_sent_instead_of_the_action() -> None:
    with ScriptedChatServer(_model("SHUT_RDWR")) as llm:
        decision = await _decide(llm)
    assert str(decision.action) == "send_msg_to_user('SHUT_RDWR')"
    assert decision.answer_check is not None
    assert decision.answer_check.replaced == "click('681')"
    assert decision.answer_check.answer == "SHUT_RDWR"
    # the check is its own short conversation, asked under a JSON schema: it holds the
    # goal and the reasoning, not the page
    check = llm.requests[-1]
    assert check["response_format"]["type"] == "json_schema"
    assert "SHUT_RDWR constant is the one" in check["messages"][-1]["content"]
    assert "Socket families" not in check["messages"][-1]["content"]
    assert len(decision.calls) == 2


async def test_an_answer_whose_words_are_not_on_the_page_is_not_taken() -> None:
    with ScriptedChatServer(_model("SHUT_BOTH")) as llm:
        decision = await _decide(llm)
    assert str(decision.action) == "click('681')"
    assert decision.answer_check is not None and decision.answer_check.answer is None
    assert "not on the page shown" in (decision.answer_check.rejected or "")


async def test_no_answer_in_the_reasoning_keeps_the_action() -> None:
    with ScriptedChatServer(_model(None)) as llm:
        decision = await _decide(llm)
    assert str(decision.action) == "click('681')"
    assert decision.answer_check is not None and decision.answer_check.rejected is None


@pytest.mark.parametrize("knobs, goal", [
    ({}, "Click the link 'socket.close()'."),          # auto: not a question
    ({"answer_check": "off"}, QUESTION),
])
async def test_goals_that_ask_nothing_and_check_off_make_no_check(
    knobs: dict[str, Any], goal: str
) -> None:
    with ScriptedChatServer(_model("SHUT_RDWR")) as llm:
        decision = await _decide(llm, goal, **knobs)
    assert str(decision.action) == "click('681')" and decision.answer_check is None
    assert len(llm.requests) == 1


async def test_giving_up_on_a_question_is_checked_too() -> None:
    give_up = ("<think>It is SHUT_RDWR, but there is no form to fill.</think>"
               "<action>report_infeasible('There is no form.')</action>")
    with ScriptedChatServer(_model("SHUT_RDWR", give_up)) as llm:
        decision = await _decide(llm)
    assert str(decision.action) == "send_msg_to_user('SHUT_RDWR')"


async def test_an_action_that_answers_is_not_checked() -> None:
    answer = "<think>It is SHUT_RDWR.</think><action>send_msg_to_user('SHUT_RDWR')</action>"
    with ScriptedChatServer(_model("SHUT_RDWR", answer)) as llm:
        decision = await _decide(llm)
    assert decision.answer_check is None and len(llm.requests) == 1


async def test_a_malformed_check_is_asked_again_once_then_the_action_stands() -> None:
    def reply(messages: list[dict[str, Any]]) -> str:
        if _is_check(messages) or messages[-1]["content"].startswith("Not JSON"):
            return "SHUT_RDWR, I think"
        return CLICK
    with ScriptedChatServer(reply) as llm:
        decision = await _decide(llm)
    assert str(decision.action) == "click('681')"
    assert len(llm.requests) == 3  # the action, the check, one re-ask


@pytest.mark.parametrize("goal, question", [
    (QUESTION, True),
    ("What does asyncio.shield() protect an awaitable from? Tell me.", True),
    ("Tell me the default of ListenBacklog.", True),
    ("In which release was Callgrind added", True),
    ("Open the entry of importlib.reload().", False),
    ("Which class decorator makes sure that no two members of an enumeration share a "
     "value? Open its entry.", False),
    ("Which directive sets the backlog? Open its entry and tell me its default.", True),
    ("How many large items are there? Click the button with that number.", False),
    ("Enter 'Alice' into the text field and press Submit.", False),
    ("Select 12/03/2016 in the date picker and hit submit.", False),
    ("Click on the 'Showcase' tab.", False),
])
def test_which_goals_ask_a_question(goal: str, question: bool) -> None:
    assert asks_a_question(goal) is question


def test_grounding_is_by_words_of_the_page() -> None:
    page = "\n".join(PAGE)
    assert grounded("SHUT_RDWR", page)
    assert grounded("further sends and receives", page)
    assert not grounded("SHUT_BOTH", page)
    assert not grounded("", page)


def test_where_the_task_judges_by_its_own_status_the_agent_never_answers_from_reasoning(
) -> None:
    # MiniWoB++'s "How many large items are there?" is answered by clicking a button:
    # an episode whose environment the agent cannot end builds its policy with the check off
    from linewise.runtime.episode import EpisodeConfig
    from linewise.testing import FunctionModel

    config = EpisodeConfig(agent=AgentSettings(answer_check="on"))
    model = FunctionModel(lambda _messages, _info: CLICK)
    assert config.make_agent(model, agent_can_end=False).settings.answer_check == "off"
    assert config.make_agent(model, agent_can_end=True).settings.answer_check == "on"
