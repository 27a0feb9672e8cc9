"""The navigation policy holds in BrowserGym's own browser too: a BrowserGym task (the
open-ended one, on a local site) whose page and model try every route to refused URLs
gets them blocked and recorded, and the "exfiltration" server is never reached; with the
policy off the same episode does reach it."""

from __future__ import annotations

from pathlib import Path

import pytest

from linewise.records import StepRecord
from linewise.runtime.browser.chromium import Browser, BrowserConfig
from linewise.runtime.tasks.schema import BrowserGymTask
from linewise.runtime.trace import read_steps
from linewise.settings import BrowserSettings, NavigationSettings
from tests.support.episodes import resources_of, run_episode
from tests.support.sites import Site, Step, click, scripted

STEPS: list[Step] = [
    "goto('file:///etc/hostname')",
    "goto('chrome://version')",
    click("file link"),
    click("off link"),
    click("blank link"),
    click("redirect link"),
    click("good redirect link"),
    "goto('{site}/open')",
    "goto('{site}/iframe')",
    "goto('{site}/meta')",
]


def _task(site: Site, max_steps: int) -> BrowserGymTask:
    return BrowserGymTask(
        id="bgym-policy", browsergym="openended", max_steps=max_steps,
        task_kwargs={"start_url": f"http://127.0.0.1:{site.port}/", "goal": "Look around."},
        allowed_domains=(f"127.0.0.1:{site.port}",),
    )


async def _run(site: Site, tmp_path: Path, plan: list[Step], *, enforce: bool
               ) -> list[StepRecord]:
    steps = [s.format(site=site.fill["site"]) if isinstance(s, str) else s for s in plan]
    config = BrowserConfig.from_settings(
        BrowserSettings(navigation=NavigationSettings(enforce=enforce))
    )
    async with Browser(config) as browser:
        summary = await run_episode(_task(site, len(steps)),
                                    resources_of(browser, scripted(steps)), tmp_path)
    assert summary.status == "finished", summary.error
    records = read_steps(tmp_path / "bgym-policy")
    assert len(records) == len(steps)
    return records


@pytest.mark.slow
async def test_policy_blocks_every_route_in_browsergym(
    sites: tuple[Site, Site], tmp_path: Path
) -> None:
    site, exfil = sites
    records = await _run(site, tmp_path, STEPS, enforce=True)
    assert not exfil.hits, exfil.hits
    blocked = [b for r in records for b in r.blocked]
    by_step = [[b.initiator for b in r.blocked] for r in records]
    errors = [r.action_error or "" for r in records]
    assert "refused by the navigation policy" in errors[0] and by_step[0] == ["model"]
    assert "refused by the navigation policy" in errors[1] and by_step[1] == ["model"]
    assert any(b.url.startswith("file:") for b in records[2].blocked)
    assert by_step[3] == ["page"] and "task's own host and port" in records[3].blocked[0].reason
    assert by_step[4] == ["popup"]
    assert by_step[5] == ["redirect"]
    assert by_step[6] == [] and site.hits["/landed"] >= 1
    assert by_step[7] == ["popup"]
    assert sorted(by_step[8]) == ["frame", "frame"]
    assert by_step[9] == ["page"]
    # The page's own refused routes were told to the model; it stayed on the site.
    assert "The browser refused to open" in errors[3]
    assert all(r.url.startswith(site.fill["site"]) for r in records)
    assert len(blocked) == sum(len(b) for b in by_step)


@pytest.mark.slow
async def test_without_the_policy_the_page_reaches_the_other_server(
    sites: tuple[Site, Site], tmp_path: Path
) -> None:
    site, exfil = sites
    plan = [click("off link"), "goto('{site}/')", click("redirect link")]
    records = await _run(site, tmp_path, plan, enforce=False)
    assert not any(r.blocked for r in records)
    assert exfil.hits["/link?leak=1"] == 1 and exfil.hits["/redirected?leak=1"] == 1


@pytest.mark.slow
async def test_no_channel_of_a_redirected_page_leaves_in_browsergym(
    leaky_servers: tuple[Site, Site], tmp_path: Path
) -> None:
    """The sync shell, with the same proxy: a page reached through a redirect sends
    nothing to another loopback port, WebSockets included."""
    site, exfil = leaky_servers
    task = BrowserGymTask(
        id="bgym-leaky", browsergym="openended", max_steps=2,
        task_kwargs={"start_url": f"http://127.0.0.1:{site.port}/to-leaky", "goal": "Look."},
    )
    async with Browser(BrowserConfig()) as browser:
        summary = await run_episode(task, resources_of(browser, scripted(
            ["noop(1000)", "noop(1000)"])), tmp_path)
    assert summary.status == "finished", summary.error
    assert site.hits["/sync"] == 1  # the page went through every channel
    assert sum(exfil.hits.values()) == 0, exfil.hits
    # its window.open('data:…') was refused and the blank tab closed: the agent stayed
    records = read_steps(tmp_path / "bgym-leaky")
    assert any(b.url.startswith("data:") for r in records for b in r.blocked)
    assert records[-1].url.endswith("/leaky") and len(records[-1].tabs) == 1
