"""Every action function against a real page, and every failure turned into feedback."""

from __future__ import annotations

import re

import pytest

from linewise.agent.action_parser import parse_action
from linewise.agent.actions import ACTIONS, ActionContext, describe_action_space, iso_date
from linewise.axtree import bids_in
from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.browser.executor import ActionOutcome, execute_action
from linewise.runtime.browser.extraction import observe
from linewise.runtime.browser.observation import Observation
from linewise.testing import StaticServer
from tests.support.pages import bid_of

EXPECTED_ACTIONS = {
    "click", "dblclick", "hover", "fill", "clear", "select_option", "press", "focus",
    "scroll", "goto", "go_back", "go_forward", "new_tab", "tab_focus", "tab_close",
    "send_msg_to_user", "report_infeasible", "noop",
}


class Driver:
    """Observe, then run action text, as the episode loop does."""

    def __init__(self, session: BrowserSession) -> None:
        self.session = session
        self.obs: Observation | None = None
        self.ctx: ActionContext | None = None

    async def observe(self) -> Observation:
        self.obs = await observe(self.session, screenshot=False)
        return self.obs

    def bid(self, pattern: str) -> str:
        assert self.obs is not None
        return bid_of(self.obs.lines, pattern)

    async def run(self, text: str) -> ActionOutcome:
        assert self.obs is not None
        self.ctx = ActionContext(self.session, timeout_ms=1500,
                                 known_bids=frozenset(self.obs.elements),
                                 interactive_hint=self.obs.interactive_hint())
        return await execute_action(parse_action(text), self.ctx)

    async def text(self, selector: str) -> str:
        return await self.session.page.inner_text(selector)


async def test_vocabulary_is_browsergyms() -> None:
    assert set(ACTIONS) == EXPECTED_ACTIONS | {"run_skill"}
    space = describe_action_space()
    for name in EXPECTED_ACTIONS:
        assert f"{name}(" in space
    assert "Examples:" in space and "ctx" not in space
    # run_skill is offered only where a run loads skills (--skills)
    assert "run_skill(" not in space
    assert "run_skill(" in describe_action_space(["click", "run_skill"])


@pytest.mark.slow
async def test_element_actions(session: BrowserSession, pages: StaticServer) -> None:
    await session.page.goto(pages.url("form.html"))
    d = Driver(session)
    await d.observe()

    assert (await d.run(f"click('{d.bid('button .Click me')}')")).error is None
    assert await d.text("#counter") == "Clicked 1 times"

    assert (await d.run(f"dblclick('{d.bid('button .Double click me')}')")).error is None
    assert await d.text("#double") == "Double clicked"

    assert (await d.run(f"hover('{d.bid('button .Hover me')}')")).error is None
    assert await d.text("#status") == "Hovered"

    assert (await d.run(f"fill('{d.bid('textbox .Name')}', 'Alice')")).error is None
    assert await session.page.input_value("#name") == "Alice"

    assert (await d.run(f"clear('{d.bid('textbox .Bio')}')")).error is None
    assert await session.page.input_value("#bio") == ""

    assert (await d.run(f"select_option('{d.bid('combobox .Color')}', 'blue')")).error is None
    assert await session.page.input_value("#color") == "b"

    # an option of a closed list is never visible: a click on it picks it
    await session.page.evaluate(
        "document.querySelector('#color').addEventListener('change', "
        "() => { document.body.dataset.changed = 'yes'; })")
    assert (await d.run(f"click('{d.bid('option .green')}')")).error is None
    assert await session.page.input_value("#color") == "g"
    assert await session.page.evaluate("document.body.dataset.changed") == "yes"

    multi = d.bid("listbox .Tags")
    assert (await d.run(f"select_option('{multi}', ['alpha', 'gamma'])")).error is None
    selected = await session.page.eval_on_selector(
        "#tags", "s => Array.from(s.selectedOptions).map(o => o.value)")
    assert selected == ["alpha", "gamma"]
    await d.observe()
    beta = d.bid("option .beta")
    assert (await d.run(f"click('{beta}', modifiers=['Control'])")).error is None
    assert await session.page.eval_on_selector(
        "#tags", "s => Array.from(s.selectedOptions).map(o => o.value)") == [
        "alpha", "beta", "gamma"]
    assert (await d.run(f"click('{beta}')")).error is None
    assert await session.page.eval_on_selector(
        "#tags", "s => Array.from(s.selectedOptions).map(o => o.value)") == ["beta"]

    keys = d.bid("textbox ''") if False else await _keys_bid(d)
    assert (await d.run(f"fill('{keys}', 'hello')")).error is None
    assert (await d.run(f"press('{keys}', 'Enter')")).error is None
    assert await d.text("#status") == "Enter pressed: hello"

    assert (await d.run(f"focus('{d.bid('textbox .Name')}')")).error is None
    obs = await d.observe()
    assert obs.focused_bid == d.bid("textbox .Name")

    span = d.bid("generic.*clickable")
    assert (await d.run(f"click('{span}')")).error is None
    assert await d.text("#status") == "Span clicked"

    inner = d.bid("button .Inner button")
    assert (await d.run(f"click('{inner}')")).error is None
    frame = session.page.frame_locator("#frame")
    assert await frame.locator("#inner").inner_text() == "Inner clicked"

    assert (await d.run("scroll(0, 2500)")).error is None
    assert await session.page.evaluate("window.scrollY") > 1000


async def _keys_bid(d: Driver) -> str:
    handle = await d.session.page.query_selector("#keys")
    assert handle is not None
    bid = await handle.get_attribute(d.session.bid_attribute)
    assert bid
    return bid


@pytest.mark.slow
async def test_navigation_and_tabs(session: BrowserSession, pages: StaticServer) -> None:
    await session.page.goto(pages.url("form.html"))
    d = Driver(session)
    await d.observe()
    assert (await d.run(f"click('{d.bid('link .Go to page two')}')")).error is None
    assert session.page.url.endswith("page2.html")
    assert (await d.run("go_back()")).error is None
    assert session.page.url.endswith("form.html")
    assert (await d.run("go_forward()")).error is None
    assert session.page.url.endswith("page2.html")
    assert (await d.run(f"goto('{pages.url('form.html')}')")).error is None
    assert session.page.url.endswith("form.html")

    # a link with target=_blank opens a tab that becomes active
    await d.observe()
    assert (await d.run(f"click('{d.bid('link .Open page two in a new tab')}')")).error is None
    assert len(session.pages) == 2 and session.page.url.endswith("page2.html")
    assert (await d.run("tab_focus(0)")).error is None
    assert session.page.url.endswith("form.html")
    assert (await d.run("new_tab()")).error is None
    assert len(session.pages) == 3 and session.page.url == "about:blank"
    assert (await d.run("tab_close()")).error is None
    assert len(session.pages) == 2
    obs = await d.observe()
    assert sum(t.active for t in obs.tabs) == 1
    assert "tab index 7 out of range" in ((await d.run("tab_focus(7)")).error or "")


async def test_messages_and_noop(session: BrowserSession, pages: StaticServer) -> None:
    await session.page.goto(pages.url("page2.html"))
    d = Driver(session)
    await d.observe()
    assert (await d.run("send_msg_to_user('The answer is 42')")).error is None
    assert d.ctx is not None and d.ctx.messages_to_user == ["The answer is 42"]
    assert (await d.run("report_infeasible('no such form')")).error is None
    assert d.ctx.infeasible_reason == "no such form"
    outcome = await d.run("noop(300)")
    assert outcome.error is None and outcome.duration_ms >= 290


@pytest.mark.slow
async def test_failures_become_feedback(session: BrowserSession, pages: StaticServer) -> None:
    await session.page.goto(pages.url("form.html"))
    d = Driver(session)
    await d.observe()
    unknown = await d.run("click('99999')")
    assert unknown.error and "99999" in unknown.error and "not in the current page" in unknown.error
    assert f"[{d.bid('textbox .Name')}] textbox 'Name'" in unknown.error  # ids it can use

    hidden = await _bid_of_selector(d, "#hidden-button")
    error = (await d.run(f"click('{hidden}')")).error
    assert error and error.startswith("TimeoutError") and "not visible" in error

    disabled = await _bid_of_selector(d, "#disabled-button")
    error = (await d.run(f"click('{disabled}')")).error
    assert error and "not enabled" in error

    error = (await d.run(f"select_option('{d.bid('textbox .Name')}', 'x')")).error
    assert error and "select" in error.lower()

    # the page still works after all that
    assert (await d.run(f"click('{d.bid('button .Click me')}')")).error is None


async def _bid_of_selector(d: Driver, selector: str) -> str:
    handle = await d.session.page.query_selector(selector)
    assert handle is not None
    bid = await handle.get_attribute(d.session.bid_attribute)
    assert bid
    return bid


def test_dates_are_read_in_the_locales_order() -> None:
    assert iso_date("12/09/2014", month_first=True) == "2014-12-09"
    assert iso_date("12/09/2014", month_first=False) == "2014-09-12"
    assert iso_date("25/09/2014", month_first=True) == "2014-09-25"  # 25 is no month
    assert iso_date("2014/9/1", month_first=True) == "2014-09-01"
    assert iso_date("2014-12-09", month_first=False) == "2014-12-09"
    assert iso_date("31/31/2014", month_first=True) is None
    assert iso_date("12/09/14", month_first=True) is None  # whose century?
    assert iso_date("12", month_first=True) is None


async def test_a_date_field_is_filled_with_the_date_as_the_page_shows_it(
    session: BrowserSession, pages: StaticServer,
) -> None:
    # MiniWoB++'s enter-date: the 1.5B model typed 12/09/2014, which Playwright refuses
    # on a date input ("Malformed value")
    await session.page.goto(pages.url("fields.html"))
    d = Driver(session)
    await d.observe()
    date, text = d.bid("\\] Date 'Date'"), d.bid("textbox .Text")
    # The month, day and year spin buttons are the field's own parts: one bid, on the
    # field (printed on each part, it read as three fields, and the model filled '12').
    parts = [line for line in d.obs.lines if re.search(r"spinbutton '(Month|Day|Year)", line)]
    assert len(parts) >= 3 and not any(bids_in([line]) for line in parts), parts
    assert bids_in([next(line for line in d.obs.lines if "spinbutton 'Number'" in line)])
    assert sum(f"[{date}]" in line for line in d.obs.lines) == 1
    assert (await d.run(f"fill('{date}', '12/09/2014')")).error is None
    assert await session.page.input_value("input[type=date]") == "2014-12-09"
    error = (await d.run(f"fill('{date}', '12')")).error
    assert error is not None and "Malformed value" in error
    error = (await d.run(f"fill('{date}', '13/13/2014')")).error
    assert error is not None and "year-month-day, e.g. '2014-12-09'" in error
    # any other field takes the text as written
    assert (await d.run(f"fill('{text}', '12/09/2014')")).error is None
    assert await session.page.input_value("input[type=text]") == "12/09/2014"
