"""The action policy against scripted models, behind real HTTP and in-process: re-asks
and futile repeats."""

from __future__ import annotations

from typing import Any

import pytest

from linewise.agent.page_view import page_key
from linewise.agent.policy import ActionAgent
from linewise.agent.prompt import PageView
from linewise.axtree import element_lines
from linewise.errors import LLMError
from linewise.records import LLMCall
from linewise.runtime.models.chat import ChatClient
from linewise.settings import AgentSettings, EndpointSettings
from linewise.testing import CallInfo, FunctionModel, ScriptedChatServer
from linewise.testing.gbnf import admits

FILL = "<think>Type the name.</think><action>fill('16', 'Alice')</action>"
SUBMIT = "<think>The name is in; submit.</think><action>click('17')</action>"
PAGE = ["RootWebArea 'Form'", "\t[16] textbox '' value='Alice', focused", "\t[17] button 'Submit'"]


def _told_futile(messages: list[dict[str, Any]]) -> bool:
    return "nothing on the page changed" in messages[-1]["content"]


def stubborn(messages: list[dict[str, Any]]) -> str:
    """Fills again and again; only the futile-repeat note makes it submit."""
    return SUBMIT if _told_futile(messages) else FILL


def first_admitted(preferred: list[str]) -> FunctionModel:
    """A model that answers the first of ``preferred`` (a list the test may change) its
    request's grammar admits, as llama.cpp's sampling under a grammar would."""
    def grammar_bound(messages: list[dict[str, Any]], info: CallInfo) -> str:
        grammar = info.params["extra_body"]["grammar"]
        return next(a for a in (f"<think>Try.</think><action>{c}</action>" for c in preferred)
                    if admits(grammar, a))

    return FunctionModel(grammar_bound)


def _view(lines: list[str]) -> PageView:
    return PageView(url="http://form/", text="\n".join(lines),
                    page_key=page_key("http://form/", lines))


async def _agent_after_one_fill(server: ScriptedChatServer, **knobs: Any) -> ActionAgent:
    agent = ActionAgent(ChatClient(EndpointSettings(base_url=server.base_url,
                                                    model=server.model)),
                        AgentSettings(**knobs))
    first = await agent.decide("Enter Alice and submit.", _view(PAGE))
    assert str(first.action) == "fill('16', 'Alice')" and first.repeat_escape is None
    agent.remember(first, None)
    return agent


async def test_a_repeat_on_an_unchanged_page_is_asked_again_at_temperature() -> None:
    with ScriptedChatServer(stubborn) as llm:
        agent = await _agent_after_one_fill(llm, reask_temperature=0.9)
        decision = await agent.decide("Enter Alice and submit.", _view(PAGE))
    assert str(decision.action) == "click('17')" and decision.repeat_escape == "escaped"
    assert decision.think == "The name is in; submit."
    assert [call.attempt for call in decision.calls] == [0, 1]
    assert [r["temperature"] for r in llm.requests] == [0.0, 0.0, 0.9]
    escape = llm.requests[-1]["messages"]
    assert escape[-2] == {"role": "assistant", "content": FILL}
    assert "You answered fill('16', 'Alice') again" in escape[-1]["content"]


async def test_a_repeat_on_a_changed_page_runs_as_answered() -> None:
    changed = [*PAGE[:1], "\tStaticText 'Saved'", *PAGE[1:]]
    with ScriptedChatServer(stubborn) as llm:
        agent = await _agent_after_one_fill(llm)
        decision = await agent.decide("Enter Alice and submit.", _view(changed))
    assert str(decision.action) == "fill('16', 'Alice')" and decision.repeat_escape is None
    assert len(llm.requests) == 2


async def test_a_repeat_of_a_failed_action_on_the_same_page_is_asked_again() -> None:
    with ScriptedChatServer(stubborn) as llm:
        agent = await _agent_after_one_fill(llm)
        agent.history[-1].error = "TimeoutError: element not visible\nCall log: ..."
        decision = await agent.decide("Enter Alice and submit.", _view(PAGE))
    assert str(decision.action) == "click('17')" and decision.repeat_escape == "escaped"
    told = llm.requests[-1]["messages"][-1]["content"]
    assert "it failed (TimeoutError: element not visible) and nothing on the page changed" \
        in told and "Call log" not in told


async def test_with_escapes_off_a_repeat_runs_as_answered() -> None:
    with ScriptedChatServer(stubborn) as llm:
        off = await _agent_after_one_fill(llm, repeat_escapes=0)
        decision = await off.decide("Enter Alice and submit.", _view(PAGE))
    assert str(decision.action) == "fill('16', 'Alice')"
    assert decision.repeat_escape is None and len(decision.calls) == 1
    assert len(llm.requests) == 2


async def test_a_repeat_every_re_ask_insists_on_is_kept() -> None:
    answers = iter([FILL, FILL, "<action>click(</action>", FILL])
    with ScriptedChatServer(lambda _messages: next(answers)) as llm:
        agent = await _agent_after_one_fill(llm, repeat_escapes=2)
        decision = await agent.decide("Enter Alice and submit.", _view(PAGE))
    assert str(decision.action) == "fill('16', 'Alice')" and decision.repeat_escape == "kept"
    assert decision.error is None and len(decision.calls) == 3
    assert len(llm.requests) == 4


async def test_under_the_grammar_the_escape_forbids_the_repeated_call() -> None:
    # like llama.cpp, the model can only write what the request's grammar admits: the
    # stubborn model's fill is its answer whenever the grammar allows it
    def grammar_bound(messages: list[dict[str, Any]], info: CallInfo) -> str:
        grammar = info.params["extra_body"]["grammar"]
        return FILL if admits(grammar, FILL) else SUBMIT

    model = FunctionModel(grammar_bound)
    agent = ActionAgent(model, AgentSettings(action_grammar="on"))
    view = _view(PAGE).model_copy(update={"elements": element_lines(PAGE, ["16", "17"])})
    agent.remember(await agent.decide("Enter Alice and submit.", view), None)
    decision = await agent.decide("Enter Alice and submit.", view)
    assert str(decision.action) == "click('17')" and decision.repeat_escape == "escaped"
    first, escape = (r.params["extra_body"]["grammar"] for r in model.requests[1:])
    assert admits(first, FILL) and not admits(escape, FILL)
    # the repeat cannot be written: the escape is greedy, not sampled at the re-ask's
    # temperature (which made the 1.5B model answer click('17', 'middle'))
    assert "temperature" not in model.requests[-1].params
    assert admits(escape, FILL.replace("fill('16'", "press('16'").replace("Alice", "Enter"))


async def test_pointing_at_an_element_in_turn_is_escaped_under_the_grammar() -> None:
    # the loop seen on documentation pages: focus, click, focus, click on one element
    # whose clicks change nothing; the model answers the first call its grammar admits
    preferred = ["focus('17')", "click('17')", "hover('17')", "fill('16', 'Alice')"]

    model = first_admitted(preferred)
    agent = ActionAgent(model, AgentSettings(action_grammar="on"))
    view = _view(PAGE).model_copy(update={"elements": element_lines(PAGE, ["16", "17"])})
    first = await agent.decide("Submit the form.", view)
    agent.remember(first, None)
    preferred.remove("focus('17')")  # it now prefers the click, which changes nothing either
    second = await agent.decide("Submit the form.", view)
    agent.remember(second, None)
    assert [str(first.action), str(second.action)] == ["focus('17')", "click('17')"]
    assert second.repeat_escape is None  # a first click after a focus is not a repeat
    preferred.insert(0, "focus('17')")
    third = await agent.decide("Submit the form.", view)
    assert third.repeat_escape == "escaped" and str(third.action) == "fill('16', 'Alice')"
    told = model.requests[-1].messages[-1]["content"]
    assert "Since the page last changed you did focus('17'), then click('17')" in told


async def test_a_toggle_clicked_back_and_forth_is_escaped_the_fourth_time() -> None:
    # a checkbox the model clicks step after step: checked, unchecked, checked…
    unchecked = ["RootWebArea 'Form'", "\t[22] checkbox 'a8h7', checked='false'",
                 "\t[31] button 'Submit'"]
    checked = [unchecked[0], unchecked[1].replace("'false'", "'true'"), unchecked[2]]
    toggle = "<think>Select a8h7.</think><action>click('22')</action>"
    submit = "<think>Submit.</think><action>click('31')</action>"

    def grammar_bound(messages: list[dict[str, Any]], info: CallInfo) -> str:
        return toggle if admits(info.params["extra_body"]["grammar"], toggle) else submit

    model = FunctionModel(grammar_bound)
    agent = ActionAgent(model, AgentSettings(action_grammar="on"))
    decisions = []
    for lines in (unchecked, checked, unchecked, checked):
        view = _view(lines).model_copy(update={"elements": element_lines(lines, ["22", "31"])})
        decisions.append(await agent.decide("Select a8h7 and click Submit.", view))
        agent.remember(decisions[-1], None)
    assert [str(d.action) for d in decisions] == [
        "click('22')", "click('22')", "click('22')", "click('31')"]
    assert [d.repeat_escape for d in decisions] == [None, None, None, "escaped"]
    told = model.requests[-1].messages[-1]["content"]
    assert "You did click('22') on this same page before" in told


async def test_a_malformed_answer_is_asked_again_at_the_reask_temperature() -> None:
    answers = iter(["<action>click('16'); click('17')</action>", SUBMIT])
    with ScriptedChatServer(lambda _messages: next(answers)) as llm:
        agent = ActionAgent(ChatClient(EndpointSettings(base_url=llm.base_url,
                                                        model=llm.model)),
                            AgentSettings(reask_temperature=0.8))
        decision = await agent.decide("Submit the form.", _view(PAGE))
    assert str(decision.action) == "click('17')" and len(decision.calls) == 2
    assert [r["temperature"] for r in llm.requests] == [0.0, 0.8]
    assert "found 2 statements" in llm.requests[1]["messages"][-1]["content"]


# -- the same policy over an in-process model: no server, no network


async def test_an_in_process_model_drives_the_policy() -> None:
    model = FunctionModel(lambda messages, info: stubborn(messages), model="stubborn")
    agent = ActionAgent(model, AgentSettings(reask_temperature=0.6))
    first = await agent.decide("Enter Alice and submit.", _view(PAGE))
    agent.remember(first, None)
    second = await agent.decide("Enter Alice and submit.", _view(PAGE))
    assert str(first.action) == "fill('16', 'Alice')"
    assert str(second.action) == "click('17')" and second.repeat_escape == "escaped"
    assert [request.params for request in model.requests] == [{}, {}, {"temperature": 0.6}]
    for call in [*first.calls, *second.calls]:
        assert call.model == "stubborn" and call.purpose == "action" and call.usage is None
        assert call.prompt_tokens > 50 and call.completion_tokens > 5


async def test_a_malformed_in_process_answer_is_asked_again() -> None:
    model = FunctionModel.answering(["<action>click(</action>", "no tags at all", SUBMIT])
    decision = await ActionAgent(model).decide("Submit the form.", _view(PAGE))
    assert str(decision.action) == "click('17')" and decision.error is None
    assert [call.attempt for call in decision.calls] == [0, 1, 2]
    assert [call.response for call in decision.calls][:2] == ["<action>click(</action>",
                                                             "no tags at all"]
    assert model.requests[2].messages[-2] == {"role": "assistant", "content": "no tags at all"}


async def test_a_failing_model_ends_the_decision_with_the_failed_call() -> None:
    def overloaded(messages: list[dict[str, Any]], info: CallInfo) -> str:
        if info.index:
            raise LLMError("model overloaded", status=503)
        return "<action>click(</action>"

    with pytest.raises(LLMError) as failure:
        await ActionAgent(FunctionModel(overloaded)).decide("Submit the form.", _view(PAGE))
    assert failure.value.status == 503
    call = failure.value.call
    assert call is not None and call.attempt == 1 and call.error == "model overloaded"
    assert call.messages[-2] == {"role": "assistant", "content": "<action>click(</action>"}


# -- constrained decoding: the action grammar, and endpoints that refuse it

def _client(server: ScriptedChatServer, *, embedded: bool) -> ChatClient:
    return ChatClient(EndpointSettings(base_url=server.base_url, model=server.model),
                      embedded=embedded)


async def test_the_embedded_model_decodes_under_the_grammar_of_the_views_bids() -> None:
    with ScriptedChatServer(lambda _messages: SUBMIT) as llm:
        agent = ActionAgent(_client(llm, embedded=True))
        view = _view(PAGE).model_copy(
            update={"elements": element_lines(PAGE, ["16", "17"])})
        decision = await agent.decide("Submit the form.", view)
    assert str(decision.action) == "click('17')" and decision.decoding == "grammar"
    grammar = llm.requests[0]["grammar"]
    assert admits(grammar, SUBMIT) and admits(grammar, FILL)
    assert not admits(grammar, SUBMIT.replace("'17'", "'18'"))  # not in the view
    assert not admits(grammar, FILL.replace("'16'", "'17'"))  # a button is not a field


async def test_where_the_page_ends_the_episode_the_agent_is_offered_no_answer_or_give_up(
) -> None:
    # MiniWoB++'s click-test: the 1.5B model answered report_infeasible('The page does not
    # contain a button.') on "[14] button 'Click Me!'"; an episode its environment ends is
    # offered neither ending action, in the prompt or under the grammar
    from linewise.runtime.episode import EpisodeConfig

    give_up = "<think>No button.</think><action>report_infeasible('no button')</action>"
    with ScriptedChatServer(lambda _messages: give_up) as llm:
        config = EpisodeConfig(agent=AgentSettings(parse_retries=1))
        page_ends = config.make_agent(_client(llm, embedded=True), agent_can_end=False)
        view = _view(PAGE).model_copy(update={"elements": element_lines(PAGE, ["16", "17"])})
        decision = await page_ends.decide("Submit the form.", view)
        agent_ends = config.make_agent(_client(llm, embedded=True), agent_can_end=True)
        await agent_ends.decide("Submit the form.", view)
    assert decision.action is None  # the give-up is refused, asked again, refused again
    system, grammar = llm.requests[0]["messages"][0]["content"], llm.requests[0]["grammar"]
    assert "report_infeasible" not in system and "send_msg_to_user" not in system
    assert "you cannot end it or give" in system
    assert not admits(grammar, give_up) and admits(grammar, SUBMIT)
    assert "report_infeasible(" in llm.requests[-1]["messages"][0]["content"]
    assert admits(llm.requests[-1]["grammar"], give_up)


async def test_a_single_page_task_is_offered_no_navigation_or_tabs() -> None:
    # MiniWoB++'s click-test: the 1.5B model, escaping a repeat, answered goto() of the
    # task's own URL, which restarts the task with a new instance; a task that lives on
    # one page is offered no action that leaves it, in the prompt or under the grammar
    from linewise.runtime.episode import EpisodeConfig

    leave = "<think>Reload.</think><action>goto('http://localhost/click-test.html')</action>"
    with ScriptedChatServer(lambda _messages: leave) as llm:
        config = EpisodeConfig(agent=AgentSettings(parse_retries=0))
        view = _view(PAGE).model_copy(update={"elements": element_lines(PAGE, ["16", "17"])})
        one_page = config.make_agent(_client(llm, embedded=True), agent_can_end=False,
                                     single_page=True)
        assert (await one_page.decide("Submit the form.", view)).action is None
        many_pages = config.make_agent(_client(llm, embedded=True), agent_can_end=False)
        assert str((await many_pages.decide("Submit the form.", view)).action).startswith(
            "goto(")
    system, grammar = llm.requests[0]["messages"][0]["content"], llm.requests[0]["grammar"]
    for name in ("goto(", "go_back(", "go_forward(", "new_tab(", "tab_focus(", "tab_close("):
        assert name not in system
    assert not admits(grammar, leave) and admits(grammar, SUBMIT)
    assert "goto(" in llm.requests[-1]["messages"][0]["content"]
    assert admits(llm.requests[-1]["grammar"], leave)


async def test_an_endpoint_is_sent_no_grammar_unless_asked() -> None:
    with ScriptedChatServer(lambda _messages: SUBMIT) as llm:
        decision = await ActionAgent(_client(llm, embedded=False)).decide(
            "Submit the form.", _view(PAGE))
        assert decision.decoding == "free" and "grammar" not in llm.requests[0]
        forced = ActionAgent(_client(llm, embedded=False), AgentSettings(action_grammar="on"))
        assert (await forced.decide("Submit the form.", _view(PAGE))).decoding == "grammar"
        off = ActionAgent(_client(llm, embedded=True), AgentSettings(action_grammar="off"))
        assert (await off.decide("Submit the form.", _view(PAGE))).decoding == "free"
    assert ["grammar" in r for r in llm.requests] == [False, True, False]


async def test_an_endpoint_that_refuses_the_grammar_is_asked_without_it() -> None:
    with ScriptedChatServer(lambda _messages: SUBMIT, refuse_grammar=True) as llm:
        agent = ActionAgent(_client(llm, embedded=False), AgentSettings(action_grammar="on"))
        first = await agent.decide("Submit the form.", _view(PAGE))
        second = await agent.decide("Submit the form.", _view(PAGE))
    assert str(first.action) == "click('17')" and first.decoding == "refused"
    assert first.calls[0].error and "grammar" in first.calls[0].error  # the refusal is kept
    assert second.decoding == "free" and len(second.calls) == 1  # not asked again
    assert ["grammar" in r for r in llm.requests] == [True, False, False]


async def test_re_asks_stop_at_the_spending_limit() -> None:
    with ScriptedChatServer(lambda _messages: "no tags at all") as llm:
        agent = ActionAgent(_client(llm, embedded=False), AgentSettings(parse_retries=10))
        spent: list[int] = []

        def check(calls: list[LLMCall]) -> str | None:
            spent.append(len(calls))
            return "episode tokens reached --max-tokens" if len(calls) >= 2 else None

        decision = await agent.decide("Submit the form.", _view(PAGE), check)
    assert len(llm.requests) == 2 and spent == [1, 2]
    assert decision.action is None and "no <action>" in (decision.error or "")
    assert decision.reasks_stopped == "episode tokens reached --max-tokens"


DOC = ["RootWebArea 'Tasks'", "\t[30] paragraph ''", "\t\tStaticText 'Run func in a thread.'",
       "\t[31] code ''", "\t\tStaticText 'to_thread()'", "\t[32] term 'asyncio.to_thread(func)'",
       "\t[33] link 'to_thread()', url='http://docs/tasks.html#asyncio.to_thread'",
       "\t[34] paragraph ''", "\t[35] heading 'Threads'", "\t[36] button 'Search'"]


async def test_after_a_click_on_an_element_that_answers_none_only_elements_that_can_are_named(
) -> None:
    # the 1.5B model asked to open an entry clicked its paragraphs and code spans one after
    # another (a new element each time: no repeat) while the entry's link was in its view;
    # the model answers the first call its grammar admits
    walk = ["click('30')", "click('31')", "click('32')", "click('34')", "click('36')",
            "click('35')", "click('33')"]

    model = first_admitted(walk)
    agent = ActionAgent(model, AgentSettings(action_grammar="on"))
    view = _view(DOC).model_copy(update={
        "elements": element_lines(DOC, ["30", "31", "32", "33", "34", "35", "36"]),
        "clickable": frozenset({"35"})})  # a heading the page listens to clicks on
    first = await agent.decide("Open the entry of asyncio.to_thread().", view)
    assert str(first.action) == "click('30')"  # nothing tried yet on this page: any element
    agent.remember(first, None)
    walk.remove("click('30')")
    second = await agent.decide("Open the entry of asyncio.to_thread().", view)
    assert str(second.action) == "click('35')" and second.repeat_escape is None
    # told, with the elements that can be clicked and share words with the goal
    told = model.requests[-1].messages[-1]["content"]
    assert "click('30'), pointed at [30] paragraph, which does not respond to clicks" in told
    assert told.split("closest to the goal:\n")[1].splitlines()[:3] == [
        "  [33] link 'to_thread()' (#asyncio.to_thread)", "  [35] heading 'Threads'", ""]
    grammar = model.requests[-1].params["extra_body"]["grammar"]
    # pointer actions name only the clickable elements the note lists: not the button,
    # which shares no word with the goal, nor the term
    assert admits(grammar, "<think>x</think><action>hover('33')</action>")
    assert not admits(grammar, "<think>x</think><action>focus('32')</action>")
    assert not admits(grammar, "<think>x</think><action>click('36')</action>")
    # the page changed: every element may be named again
    agent.remember(second, None)
    moved = view.model_copy(update={"page_key": "another page"})
    walk.insert(0, "click('31')")
    third = await agent.decide("Open the entry of asyncio.to_thread().", moved)
    assert str(third.action) == "click('31')"


def test_the_history_says_which_pointer_actions_left_the_page_as_it_was() -> None:
    from linewise.agent.action_parser import parse_action
    from linewise.agent.history import PastStep
    from linewise.agent.prompt import render_history

    def step(call: str, key: str, error: str | None = None) -> PastStep:
        return PastStep(action=call, parsed=parse_action(call), page_key=key, error=error)

    history = [step("click('30')", "a"), step("click('33')", "a"), step("fill('4', 'x')", "b"),
               step("click('5')", "b", error="Element 5 is hidden"), step("hover('9')", "c")]
    blocks = render_history(history, page_key="c").split("Step ")[1:]
    unchanged = "  result: nothing on the page changed"
    # click('30') left page a as it was; click('33') led to page b; a fill is not pointing;
    # an error is said instead; the hover left page c, where the page still is
    assert [unchanged in block for block in blocks] == [True, False, False, False, True]
    assert render_history(history, page_key="d").count(unchanged) == 1
    # a link to an anchor changes the URL alone (the page key leaves fragments out)
    anchored = [PastStep(action="click('33')", parsed=parse_action("click('33')"),
                           page_key="a", url="http://docs/t.html")]
    went = render_history(anchored, page_key="a", url="http://docs/t.html#asyncio.to_thread")
    assert unchanged not in went
    assert went.endswith("  result: the page went to its part #asyncio.to_thread\n")
    assert unchanged in render_history(anchored, page_key="a", url="http://docs/t.html")
    assert render_history(anchored, page_key="b", url="http://docs/u.html").endswith(
        "  result: the browser went to http://docs/u.html\n")
    # a step without a known address says nothing of where it went
    assert "result" not in render_history([history[2]], page_key="z", url="http://docs/u.html")


async def test_a_click_inside_an_entry_is_told_the_links_that_open_it_and_may_name_only_those(
) -> None:
    # the 1.5B model clicked the entry's list, then, offered the entry's link beside the
    # view's other links, took one whose id began like the list's: 2126 after 2084
    from linewise.agent.targets import pointed_entry_links

    lines = [*DOC[:-1], "\t[37] link 'connect()', url='http://docs/tasks.html#connect'",
             DOC[-1], "\t[90] link 'to_thread()', url='http://docs/tasks.html#asyncio.to_thread'"]
    in_view = ["30", "31", "32", "34", "35", "36", "37"]  # the entry's links are not shown
    view = _view(DOC).model_copy(update={"url": "http://docs/tasks.html",
                                         "elements": element_lines(lines, in_view)})
    model = first_admitted(["click('34')", "click('37')", "click('90')", "click('33')"])
    agent = ActionAgent(model, AgentSettings(action_grammar="on"))
    goal = "Which function runs a blocking call in a thread? Open its entry."
    agent.remember(await agent.decide(goal, view), None)
    clicked = agent.history[-1].parsed
    entry = view.model_copy(update={"entry_links": pointed_entry_links(
        clicked, lines, frozenset(), view.url)})
    assert list(entry.entry_links) == ["33"]  # the first link to #asyncio.to_thread
    decision = await agent.decide(goal, entry)
    told = model.requests[-1].messages[-1]["content"]
    assert "pointed at [34] paragraph, which does not respond to clicks" in told
    assert told.split("Links the goal names or that open the entry it lies in:\n")[1].splitlines(
    )[:2] == ["  [33] link 'to_thread()' (#asyncio.to_thread)", ""]
    assert "[37]" not in told
    grammar = model.requests[-1].params["extra_body"]["grammar"]
    assert admits(grammar, "<think>x</think><action>click('33')</action>")
    assert not admits(grammar, "<think>x</think><action>click('37')</action>")
    assert not admits(grammar, "<think>x</think><action>click('90')</action>")
    assert str(decision.action) == "click('33')"


async def test_a_futile_repeat_is_told_to_report_a_reached_goal_where_the_agent_may() -> None:
    # on the entry it was asked to open, the model clicked the entry's link again
    again = "<think>Open it.</think><action>click('33')</action>"
    model = FunctionModel(lambda messages, info: again)
    view = _view(DOC)
    for names, reminded in ((None, True), (["click", "scroll", "noop"], False)):
        agent = ActionAgent(model, AgentSettings(), action_names=names)
        agent.remember(await agent.decide("Open the entry of asyncio.to_thread().", view), None)
        await agent.decide("Open the entry of asyncio.to_thread().", view)
        told = model.requests[-1].messages[-1]["content"]
        assert "nothing on the page changed" in told
        assert ("If the goal is already reached, say so with send_msg_to_user." in told) is reminded
    # on the entry itself, the link leads where the page already is
    there = view.model_copy(update={"url": "http://docs/tasks.html#asyncio.to_thread",
                                    "elements": element_lines(DOC, ["33"])})
    agent = ActionAgent(model, AgentSettings())
    agent.remember(await agent.decide("Open the entry of asyncio.to_thread().", there), None)
    await agent.decide("Open the entry of asyncio.to_thread().", there)
    told = model.requests[-1].messages[-1]["content"]
    assert "it leads to the address the page is already at" in told


async def test_under_the_grammar_a_link_to_where_the_page_is_is_kept_once_then_ends_the_episode(
) -> None:
    # forbidden its click on the entry it was asked to open, the model left the entry
    # for the next link it listed; allowed it, it clicked it again until the step limit
    model = first_admitted(["click('33')", "click('35')", "send_msg_to_user('It is open.')"])
    agent = ActionAgent(model, AgentSettings(action_grammar="on"))
    there = _view(DOC).model_copy(update={
        "url": "http://docs/tasks.html#asyncio.to_thread",
        "elements": element_lines(DOC, ["33", "35"])})
    agent.remember(await agent.decide("Open the entry of asyncio.to_thread().", there), None)
    again = await agent.decide("Open the entry of asyncio.to_thread().", there)
    assert again.repeat_escape == "escaped"
    assert str(again.action) == "send_msg_to_user('It is open.')"
    first, last = (model.requests[i].params["extra_body"]["grammar"] for i in (-2, -1))
    assert admits(first, "<think>x</think><action>click('33')</action>")
    for other in ("click('33')", "click('35')", "scroll(0, 200)"):
        assert not admits(last, f"<think>x</think><action>{other}</action>")
    assert admits(last, "<think>x</think><action>report_infeasible('No.')</action>")
    # an agent that does not end its episodes keeps the link
    kept = ActionAgent(model, AgentSettings(action_grammar="on"),
                       action_names=["click", "scroll"])
    kept.remember(await kept.decide("Open the entry of asyncio.to_thread().", there), None)
    again = await kept.decide("Open the entry of asyncio.to_thread().", there)
    assert again.repeat_escape == "kept" and str(again.action) == "click('33')"
    # a link elsewhere is still forbidden when made again on the unchanged page
    agent = ActionAgent(model, AgentSettings(action_grammar="on"))
    elsewhere = there.model_copy(update={"url": "http://docs/tasks.html"})
    agent.remember(await agent.decide("Open the entry of asyncio.to_thread().", elsewhere), None)
    moved = await agent.decide("Open the entry of asyncio.to_thread().", elsewhere)
    assert moved.repeat_escape == "escaped" and str(moved.action) == "click('35')"


async def test_past_thoughts_are_hidden_from_the_small_model_under_auto() -> None:
    # the 1.5B model copied its last thought word for word at every step of MiniWoB++'s
    # click-option ("…we need to focus on the 'Submit' button") and clicked the radio again
    answer = "<think>The Submit button is next.</think><action>click('17')</action>"
    prompts = []
    with ScriptedChatServer(lambda _messages: answer) as llm:
        view = _view(PAGE)
        for embedded in (True, False):
            agent = ActionAgent(_client(llm, embedded=embedded),
                                AgentSettings(past_thoughts="auto"))
            agent.remember(await agent.decide("Submit the form.", view), None)
            second = len(llm.requests)
            await agent.decide("Submit the form.", view)
            prompts.append(llm.requests[second]["messages"][1]["content"])
    small, large = prompts
    assert "Step 1:\n  action: click('17')" in small and "thought:" not in small
    assert "Step 1:\n  thought: The Submit button is next.\n  action: click('17')" in large
