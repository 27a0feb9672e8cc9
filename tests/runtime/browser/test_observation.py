"""Observation extraction on real Chromium: marking, flattening, numbering, page state."""

from __future__ import annotations

import re

from linewise.agent.action_parser import parse_action
from linewise.agent.actions import ActionContext
from linewise.axtree import number_lines
from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.browser.executor import execute_action
from linewise.runtime.browser.extraction import observe
from linewise.testing import StaticServer
from tests.support.pages import bid_of


async def test_lines_are_numbered_and_bids_stable_across_steps(
    session: BrowserSession, pages: StaticServer
) -> None:
    await session.page.goto(pages.url("form.html"))
    first = await observe(session)
    numbered = first.numbered.splitlines()
    assert len(numbered) == len(first.lines) > 20
    for number, (line, raw) in enumerate(zip(numbered, first.lines, strict=True), 1):
        assert line == f"{number}|{raw}"
    submit = bid_of(first.lines, r"button 'Submit'")
    name = bid_of(first.lines, r"textbox 'Name'")

    ctx = ActionContext(session, known_bids=frozenset(first.elements))
    outcome = await execute_action(parse_action(f"fill('{name}', 'Alice')"), ctx)
    assert outcome.error is None
    second = await observe(session)
    assert bid_of(second.lines, r"button 'Submit'") == submit
    assert bid_of(second.lines, r"textbox 'Name'") == name
    assert any("value='Alice'" in line for line in second.lines)
    assert second.focused_bid == name


async def test_inline_text_boxes_dropped_and_clickable_generics_kept(
    session: BrowserSession, pages: StaticServer
) -> None:
    await session.page.goto(pages.url("form.html"))
    obs = await observe(session)
    assert not any("InlineTextBox" in line or "LineBreak" in line for line in obs.lines)
    span = bid_of(obs.lines, r"generic.*clickable")
    span_index = next(i for i, line in enumerate(obs.lines) if f"[{span}]" in line)
    assert "Open the details" in obs.lines[span_index + 1]
    assert obs.elements[span].clickable


async def test_page_state_fields(session: BrowserSession, pages: StaticServer) -> None:
    await session.page.goto(pages.url("form.html"))
    obs = await observe(session)
    assert obs.url.endswith("/form.html")
    assert obs.title == "Test form"
    assert [t.active for t in obs.tabs] == [True]
    assert obs.screenshot_png is not None and obs.screenshot_png.startswith(b"\x89PNG")
    # elements inside the iframe carry the frame's prefix
    inner = bid_of(obs.lines, r"button 'Inner button'")
    assert re.fullmatch(r"[a-z]+[A-Z]*\d+", inner), inner
    no_shot = await observe(session, screenshot=False)
    assert no_shot.screenshot_png is None


def test_number_lines_starts_at_one() -> None:
    assert number_lines(["a", "\tb"]) == "1|a\n2|\tb"


async def test_content_skipped_by_content_visibility_auto_is_observed(
    session: BrowserSession, pages: StaticServer
) -> None:
    """Chromium leaves off-screen `content-visibility: auto` boxes out of the AXTree until
    they are scrolled near; a person sees them by scrolling, so the agent reads them too.
    `content-visibility: hidden` stays hidden, as it is from people."""
    await session.page.goto(pages.url("skipped_content.html"))
    text = "\n".join((await observe(session, screenshot=False)).lines)
    assert "heading 'Method number 40'" in text and "Entry 40 describes" in text
    assert "Inline styled appendix text" in text
    assert "Closed panel text" not in text
    again = "\n".join((await observe(session, screenshot=False)).lines)
    assert again == text


async def test_no_break_spaces_are_read_as_spaces(
    session: BrowserSession, pages: StaticServer
) -> None:
    """Preformatted text has a no-break space between every word; the flattener writes
    each as the escape ``\\xa0``, which would glue words to it for every lexical stage."""
    await session.page.goto(pages.url("preformatted.html"))
    lines = (await observe(session, screenshot=False)).lines
    text = "\n".join(lines)
    assert "heading 'Release 3.11.0'" in text
    assert "Support for Solaris/x86 and Solaris/amd64 has been added." in text
    assert "\\xa0" not in text.replace("escape stays text: \\\\xa0", "")
    assert "escape stays text: \\\\xa0 is four characters" in text
