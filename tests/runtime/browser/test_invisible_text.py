"""Text a person cannot see, on real Chromium: each hiding technique is dropped or
marked with its reason, and everything a person can see stays."""

from __future__ import annotations

import re

import pytest

from linewise.runtime.browser.chromium import BrowserSession
from linewise.runtime.browser.extraction import observe
from linewise.testing import StaticServer

HIDDEN = {
    "Hidden offscreen left.": "off-screen",
    "Hidden above the page.": "off-screen",
    "Hidden font size zero.": "font-size",
    "Hidden opacity zero.": "opacity",
    "Hidden faded twice.": "opacity",
    "Hidden white on white.": "colour",
    "Hidden dark on dark.": "colour",
    "Hidden transparent colour.": "colour",
    "Hidden clipped one pixel.": "zero-size",
    "Hidden in a collapsed box.": "zero-size",
    "Hidden scaled to nothing.": "zero-size",
}
VISIBLE = [
    "Visible heading", "Visible paragraph one.", "Visible overflowing a zero-height box.",
    "Visible inside a hidden parent.", "Visible white on blue.", "Small option",
    "Large option", "Visible button",
]


def lines_with(lines: list[str], text: str) -> list[str]:
    return [line for line in lines if text in line]


async def test_keep_shows_every_hidden_text(session: BrowserSession, pages: StaticServer) -> None:
    await session.page.goto(pages.url("invisible-text.html"))
    obs = await observe(session, screenshot=False, invisible_text="keep")
    for text in [*HIDDEN, *VISIBLE]:
        assert lines_with(obs.lines, text), text
    assert obs.invisible == {} and "invisible=" not in obs.text


async def test_mark_names_the_reason_of_each_hidden_text(
    session: BrowserSession, pages: StaticServer
) -> None:
    await session.page.goto(pages.url("invisible-text.html"))
    obs = await observe(session, screenshot=False, invisible_text="mark")
    for text, reason in HIDDEN.items():
        found = lines_with(obs.lines, text)
        assert found and all(f"invisible='{reason}'" in line for line in found), (text, found)
    for text in VISIBLE:
        found = lines_with(obs.lines, text)
        assert found and not any("invisible=" in line for line in found), (text, found)
    counted = sum(obs.invisible.values())
    assert counted == len(re.findall(r"invisible='", obs.text)) >= len(HIDDEN)
    assert set(obs.invisible) == set(HIDDEN.values())


async def test_drop_removes_hidden_text_and_keeps_the_rest(
    session: BrowserSession, pages: StaticServer
) -> None:
    await session.page.goto(pages.url("invisible-text.html"))
    obs = await observe(session, screenshot=False, invisible_text="drop")
    for text in HIDDEN:
        assert not lines_with(obs.lines, text), text
    for text in VISIBLE:
        assert lines_with(obs.lines, text), text
    # The link whose name is visually hidden text keeps its line and its name.
    assert any(re.search(r"\[\w+\] link 'Cart link name", line) for line in obs.lines)
    assert sum(obs.invisible.values()) >= len(HIDDEN)


@pytest.mark.slow
async def test_browsergym_environment_drops_the_same_hidden_text(pages: StaticServer) -> None:
    """BrowserGym's own tasks read the page through BrowserGym; the same check runs on
    it (element ids are still on the page right after BrowserGym's extraction)."""
    from linewise.runtime.browser.chromium import BrowserConfig
    from linewise.runtime.envs.browsergym import BrowserGymEnv
    from linewise.runtime.tasks.schema import BrowserGymTask
    from linewise.settings import BrowserSettings

    task = BrowserGymTask(id="bgym-invisible", browsergym="openended", task_kwargs={
        "start_url": pages.url("invisible-text.html"), "goal": "Read the page."})
    for mode in ("drop", "keep"):
        config = BrowserConfig.from_settings(BrowserSettings(invisible_text=mode))
        env = BrowserGymEnv(task, config, dict(task.task_kwargs))
        try:
            await env.reset()
            obs = await env.observe(screenshot=False)
        finally:
            await env.close()
        for text in VISIBLE:
            assert lines_with(obs.lines, text), (mode, text)
        hidden_shown = [text for text in HIDDEN if lines_with(obs.lines, text)]
        if mode == "drop":
            assert hidden_shown == [] and set(obs.invisible) == set(HIDDEN.values())
        else:
            assert hidden_shown == list(HIDDEN) and obs.invisible == {}
