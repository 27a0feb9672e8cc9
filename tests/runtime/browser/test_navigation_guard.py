"""The navigation policy in real Chromium: every route a page or the model could take to
a refused URL is blocked and recorded, the episode goes on, and nothing reaches a second
"exfiltration" server."""

from __future__ import annotations

from pathlib import Path

import pytest

from linewise.records import StepRecord
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.tasks.schema import WebTask
from linewise.runtime.trace import read_steps
from tests.support.episodes import resources_of, run_episode
from tests.support.sites import Site, Step, click, scripted


def _task(site: Site, path: str = "/", steps: int = 20) -> WebTask:
    return WebTask(id="policy", url=f"http://127.0.0.1:{site.port}{path}", goal="Look around.",
                   max_steps=steps, allowed_domains=(f"127.0.0.1:{site.port}",))


async def _run(browser: Browser, task: WebTask, steps: list[Step], out: Path
               ) -> list[StepRecord]:
    model = scripted([*steps, "send_msg_to_user('done')"])
    summary = await run_episode(task, resources_of(browser, model), out)
    assert summary.status == "finished" and summary.termination == "agent_done", summary.error
    records = read_steps(out / task.id)
    assert summary.n_steps == len(steps) + 1 == len(records)
    assert summary.blocked_navigations == sum(len(r.blocked) for r in records)
    return records


@pytest.mark.slow
async def test_model_goto_to_every_refused_scheme_is_an_action_error(
    browser: Browser, sites: tuple[Site, Site], tmp_path: Path
) -> None:
    site, exfil = sites
    assert browser.devtools_port is not None
    urls = [
        "file:///etc/hostname", "file:///etc/", "chrome://version", "javascript:alert(1)",
        "data:text/html,<p>hi</p>", f"view-source:http://127.0.0.1:{site.port}/",
        f"blob:http://127.0.0.1:{site.port}/0b6f", "about:config",
        f"http://localhost:{exfil.port}/goto?leak=1",
        f"http://127.0.0.1:{browser.devtools_port}/json/list",
        "http://169.254.169.254/latest/meta-data/",
    ]
    records = await _run(browser, _task(site), [f"goto({u!r})" for u in urls], tmp_path)
    for url, record, seen_next in zip(urls, records, records[1:], strict=False):
        assert [b.url for b in record.blocked] == [url]
        assert record.blocked[0].initiator == "model"
        assert "refused by the navigation policy" in (record.action_error or "")
        assert url in (seen_next.last_action_error or "")  # the model is told
        assert seen_next.url == f"http://127.0.0.1:{site.port}/"  # and stays put
    reasons = {b.url: b.reason for r in records for b in r.blocked}
    assert "DevTools" in reasons[urls[9]] and "metadata" in reasons[urls[10]]
    assert "other than the task's own host and port" in reasons[urls[8]]
    assert sum(exfil.hits.values()) == 0


@pytest.mark.slow
async def test_page_routes_off_the_allowlist_are_blocked_and_recorded(
    browser: Browser, sites: tuple[Site, Site], tmp_path: Path
) -> None:
    site, exfil = sites
    home = f"http://127.0.0.1:{site.port}/"
    steps: list[Step] = [
        click("file link"), click("chrome link"), click("data link"), click("off link"),
        click("blank link"), click("redirect link"), f"goto('{home}js')", "noop(500)",
        f"goto('{home}meta')", "noop(500)", f"goto('{home}meta-file')", f"goto('{home}open')",
        f"goto('{home}iframe')", f"goto('{home}blob')", "noop(300)",
    ]
    records = await _run(browser, _task(site), steps, tmp_path)
    by_step = {i: [(b.initiator, b.url) for b in r.blocked] for i, r in enumerate(records)}
    exfil_url = f"http://localhost:{exfil.port}"
    assert by_step[0] == [("page", "file:///etc/hostname")]
    assert by_step[1] and by_step[1][0][1].startswith("chrome://version")
    assert by_step[2] and by_step[2][0][1].startswith("data:text/html")
    assert by_step[3] == [("page", f"{exfil_url}/link?leak=1")]
    assert by_step[4] == [("popup", f"http://127.0.0.1:{exfil.port}/blank")]
    assert by_step[5] == [("redirect", f"{exfil_url}/redirected?leak=1")]
    assert ("page", f"{exfil_url}/js?leak=1") in by_step[6] + by_step[7]
    assert ("page", f"{exfil_url}/meta") in by_step[8] + by_step[9]
    assert ("page", "file:///etc/hostname") in by_step[10]
    assert by_step[11] == [("popup", f"{exfil_url}/open?leak=1")]
    assert sorted(i for i, _ in by_step[12]) == ["frame", "frame"]
    assert [i for i, u in by_step[13] + by_step[14] if u.startswith("blob:")] == ["page"]
    # The page stayed where it was, with one tab, and the model read about each block.
    for index in (1, 2, 3, 4, 5, 6):
        assert records[index].url == home and len(records[index].tabs) == 1
        assert "The browser refused to open" in (records[index].last_action_error or "")
    assert len(records[12].tabs) == 1  # the popup was closed
    assert "framed data secret" not in records[13].axtree
    assert "blob secret" not in records[-1].axtree
    assert records[-1].url == f"{home}iframe"
    assert site.hits["/r1"] == 1 and site.hits["/r2"] == 1
    assert sum(exfil.hits.values()) == 0, exfil.hits


@pytest.mark.slow
async def test_a_page_that_keeps_sending_the_tab_to_a_refused_document_is_left(
    browser: Browser, sites: tuple[Site, Site], tmp_path: Path
) -> None:
    """Going back from the blob lands on the page that made it, which makes it again: the
    second time, the tab is emptied instead of looping for the rest of the episode."""
    site, _ = sites
    home = f"http://127.0.0.1:{site.port}/"
    steps: list[Step] = [f"goto('{home}blob-later')", "noop(800)", "noop(900)", "noop(1000)"]
    records = await _run(browser, _task(site), steps, tmp_path)
    blobs = [b for r in records for b in r.blocked if b.url.startswith("blob:")]
    # the blob is refused once or twice (the second time when the page that made it got
    # to make it again before the undo's back landed), never in a loop
    assert blobs and len(blobs) <= 2 and {b.initiator for b in blobs} == {"page"}
    assert records[-1].url == "about:blank"
    assert all("late blob secret" not in r.axtree for r in records)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/blob-soon", "/blob-slow"] * 2)
async def test_a_page_that_navigates_while_it_is_read_is_observed_after_the_undo(
    browser: Browser, sites: tuple[Site, Site], tmp_path: Path, path: str
) -> None:
    """The page's timer fires while the step's action loads it (20 ms) or while the next
    observation reads it (250 ms): the undo may go back into a dead history entry
    (Chromium's error page) or empty the tab mid-screenshot, and the step still reads
    one whole document that is not the refused one. Timing-dependent: without the
    re-reading, half of these episodes failed on a loaded machine (as in CI), none idle."""
    site, _ = sites
    steps: list[Step] = [f"goto('http://127.0.0.1:{site.port}{path}')", "noop(300)"]
    records = await _run(browser, _task(site), steps, tmp_path)
    assert all("blob secret" not in r.axtree for r in records)
    assert records[-1].url in (f"http://127.0.0.1:{site.port}{path}", "about:blank")


async def test_a_redirect_chain_inside_the_allowlist_lands(
    browser: Browser, sites: tuple[Site, Site], tmp_path: Path
) -> None:
    site, _ = sites
    records = await _run(browser, _task(site), [click("good redirect link")], tmp_path)
    assert records[-1].url == f"http://127.0.0.1:{site.port}/landed"
    assert records[0].blocked == [] and records[0].action_error is None


@pytest.mark.slow
async def test_downloads_are_refused_by_default(
    browser: Browser, sites: tuple[Site, Site], tmp_path: Path
) -> None:
    site, _ = sites
    records = await _run(browser, _task(site),
                         [click("download link"), click("download nav link")], tmp_path)
    downloads = [d for r in records for d in r.downloads]
    assert [d.filename for d in downloads] == ["report.csv", "nav.bin"]
    assert all(d.refused and d.saved_as is None for d in downloads)
    assert not (tmp_path / "policy" / "downloads").exists()


@pytest.mark.slow
async def test_downloads_flag_saves_inside_the_episode_folder(
    sites: tuple[Site, Site], tmp_path: Path
) -> None:
    from linewise.runtime.browser.chromium import BrowserConfig
    from linewise.settings import NavigationSettings

    site, _ = sites
    config = BrowserConfig(navigation=NavigationSettings(downloads=True))
    async with Browser(config) as own:
        records = await _run(own, _task(site), [click("download link")], tmp_path)
    [download] = records[0].downloads
    assert download.saved_as == "downloads/report.csv" and download.refused is None
    assert (tmp_path / "policy" / "downloads" / "report.csv").read_text() == "a,b\n1,2\n"


@pytest.mark.slow
async def test_policy_off_lets_the_model_read_files(
    sites: tuple[Site, Site], tmp_path: Path
) -> None:
    from linewise.runtime.browser.chromium import BrowserConfig
    from linewise.settings import NavigationSettings

    site, exfil = sites
    config = BrowserConfig(navigation=NavigationSettings(enforce=False))
    async with Browser(config) as own:
        records = await _run(
            own, _task(site), [f"goto('http://localhost:{exfil.port}/goto')"], tmp_path
        )
    assert records[0].blocked == [] and exfil.hits["/goto"] == 1
