"""Choosing the link to open: a goal to open something whose action does not click a
link is asked which of the view's best-matching links opens it. Scripted models behind
a real HTTP server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from linewise.agent.link_choice import asks_to_open, candidate_links
from linewise.agent.policy import ActionAgent, page_key
from linewise.agent.prompt import PageView
from linewise.axtree import element_lines
from linewise.runtime.models.chat import ChatClient
from linewise.settings import AgentSettings, EndpointSettings
from linewise.testing import ScriptedChatServer

URL = "http://docs/library/doctest.html"
PAGE = [
    "RootWebArea 'doctest'",
    "\t[415] form ''",
    "\t\t[416] textbox 'Quick search'",
    "\t[420] link 'Option Flags', url='http://docs/library/doctest.html#option-flags'",
    "\t[1150] paragraph ''",
    "\t\tStaticText 'When specified, an'",
    "\t\t[1154] link 'ELLIPSIS', url='http://docs/library/doctest.html#doctest.ELLIPSIS'",
    "\t\tStaticText 'marker in the expected output can match any substring.'",
    "\t[1160] link 'NORMALIZE_WHITESPACE', "
    "url='http://docs/library/doctest.html#doctest.NORMALIZE_WHITESPACE'",
    "\t[1170] link 'unittest', url='http://docs/library/unittest.html#module-unittest'",
    "\t[1737] link 'ELLIPSIS', url='http://docs/library/doctest.html#doctest.ELLIPSIS'",
]
GOAL = "Open the entry of doctest's ELLIPSIS option flag."
SEARCH = ("<think>Looking for the entry of the ELLIPSIS option flag.</think>"
          "<action>click('415')</action>")


def _view() -> PageView:
    bids = ["415", "416", "420", "1150", "1154", "1160", "1170", "1737"]
    return PageView(url=URL, text="\n".join(PAGE), page_key=page_key(URL, PAGE),
                    elements=element_lines(PAGE, bids))


def _is_choice(messages: list[dict[str, Any]]) -> bool:
    return "Which one of them opens what the goal asks for" in messages[-1]["content"]


def _model(choice: str | None, action: str = SEARCH):
    def reply(messages: list[dict[str, Any]]) -> str:
        return json.dumps({"bid": choice}) if _is_choice(messages) else action
    return reply


async def _decide(server: ScriptedChatServer, goal: str = GOAL, **knobs: Any):
    agent = ActionAgent(ChatClient(EndpointSettings(base_url=server.base_url,
                                                    model=server.model)),
                        AgentSettings(**{"link_choice": "on", **knobs}))
    return await agent.decide(goal, _view())


async def test_the_link_the_model_chooses_is_clicked_instead_of_the_action() -> None:
    with ScriptedChatServer(_model("1154")) as llm:
        decision = await _decide(llm)
    assert str(decision.action) == "click('1154')"
    assert decision.link_choice is not None
    assert decision.link_choice.replaced == "click('415')"
    assert decision.link_choice.chosen == "1154"
    # the best-matching links first, the same destination once, no link sharing no word
    offered = decision.link_choice.offered
    assert set(offered) == {"1154", "420", "1160"}
    ask = llm.requests[-1]
    schema = ask["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["bid"]["anyOf"][0]["enum"] == offered
    assert "[1154] 'ELLIPSIS' → doctest.html#doctest.ELLIPSIS" in ask["messages"][-1]["content"]
    assert "unittest" not in ask["messages"][-1]["content"]


async def test_none_chosen_keeps_the_action() -> None:
    with ScriptedChatServer(_model(None)) as llm:
        decision = await _decide(llm)
    assert str(decision.action) == "click('415')"
    assert decision.link_choice is not None and decision.link_choice.chosen is None


async def test_an_id_that_was_not_offered_is_refused_and_asked_again() -> None:
    def reply(messages: list[dict[str, Any]]) -> str:
        if "is not one of the ids listed" in messages[-1]["content"]:
            return json.dumps({"bid": "1154"})
        return json.dumps({"bid": "1170"}) if _is_choice(messages) else SEARCH
    with ScriptedChatServer(reply) as llm:
        decision = await _decide(llm)
    assert str(decision.action) == "click('1154')" and len(llm.requests) == 3


@pytest.mark.parametrize("action, knobs, goal", [
    ("<think>Open it.</think><action>click('1154')</action>", {}, GOAL),  # a link already
    (SEARCH, {"link_choice": "off"}, GOAL),
    (SEARCH, {"link_choice": "auto"}, GOAL),        # auto: an endpoint's model is left alone
    (SEARCH, {}, "Type ELLIPSIS into the search box."),  # not a goal to open something
])
async def test_no_choice_is_asked(action: str, knobs: dict[str, Any], goal: str) -> None:
    with ScriptedChatServer(_model("1154", action)) as llm:
        decision = await _decide(llm, goal, **knobs)
    assert decision.link_choice is None and len(llm.requests) == 1


def test_links_rank_by_the_words_of_their_name_and_destination() -> None:
    page = [
        "RootWebArea 'asyncio'",
        "\t[10] link 'Coroutines and Tasks', url='http://d/asyncio-task.html'",
        "\t[11] link 'to_thread()', url='http://d/asyncio-task.html#asyncio.to_thread'",
        "\t[12] link 'asyncio.run()', url='http://d/asyncio-runner.html#asyncio.run'",
    ]
    links = candidate_links(None, "\n".join(page), "Open the entry of asyncio.to_thread().")
    assert links[0][0] == "11"


@pytest.mark.parametrize("goal, opens", [
    (GOAL, True),
    ("Which class decorator makes sure that no two members of an enumeration share a "
     "value? Open its entry.", True),
    ("Go to the page of the RewriteMap directive.", True),
    ("What does asyncio.shield() protect an awaitable from? Tell me.", False),
    ("Enter 'Alice' into the text field and press Submit.", False),
])
def test_which_goals_ask_to_open_something(goal: str, opens: bool) -> None:
    assert asks_to_open(goal) is opens
