"""A MiniWoB++ task is drawn in a 160x210 corner of a 1280x720 viewport: its screenshots
are cut to what the page shows (with a margin), so that the viewer's screenshot reads,
and the target's box is recorded in the cut image's coordinates. A web page's
screenshot stays whole."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from linewise.apps.viewer.build import write_viewer
from linewise.apps.viewer.paths import episode_page
from linewise.runtime.browser.chromium import Browser, BrowserSession
from linewise.runtime.episode import EpisodeConfig
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.runtime.tasks.schema import BrowserGymTask, MiniWoBTask, WebTask
from linewise.runtime.trace import read_steps
from linewise.testing import CallInfo, FunctionModel, StaticServer, miniwob_solver
from tests.support.episodes import resources_of, run_episode

SHOTS = Path("/tmp/see-shots")
BACKDROP = (0x55, 0x55, 0x55)
"""MiniWoB++'s grey body around the task's white area."""
NOT_THE_BUTTON = {BACKDROP, (255, 255, 255), (255, 255, 0)}
"""The backdrop, the task's white area and its yellow query (BrowserGym shows it): the
middle of the Submit button's box is none of them (it is the button's grey)."""


def solver(messages: list[dict[str, object]], info: CallInfo) -> str:
    return miniwob_solver(messages)  # type: ignore[arg-type]


async def shown_and_boxed(session: BrowserSession, episode: Path, index: int
                          ) -> tuple[dict[str, float], dict[str, float]]:
    """Where the viewer draws step ``index``'s screenshot and its target box, on the
    page of ``episode`` (the viewer written for its run folder)."""
    view = write_viewer(episode.parent)
    page = session.page
    await page.set_viewport_size({"width": 1400, "height": 900})
    await page.goto((view.parent / episode_page(episode.name)).as_uri() + f"#step={index}")
    await page.wait_for_selector("body[data-shown]")
    await page.wait_for_function(
        "() => { const i = document.getElementById('shot-img'); "
        "return i.complete && i.naturalWidth > 0 "
        "&& !document.getElementById('target-box').hidden }")
    shown = await page.locator("#shot-img").bounding_box()
    drawn = await page.locator("#target-box").bounding_box()
    assert shown is not None and drawn is not None
    return dict(shown), dict(drawn)


@pytest.mark.slow
async def test_miniwob_screenshots_are_cut_to_the_task_and_its_box_follows(
    browser: Browser, miniwob_server: MiniWoBServer, pages: StaticServer,
    session: BrowserSession, tmp_path: Path,
) -> None:
    resources = resources_of(browser, FunctionModel(solver), miniwob_server)
    config = EpisodeConfig(screenshots=True)
    task = MiniWoBTask(miniwob="enter-text", seed=1, max_steps=3)
    summary = await run_episode(task, resources, tmp_path / "run", config)
    assert summary.success is True and summary.directory is not None
    steps = read_steps(summary.directory)
    assert len(steps) == 2
    for step in steps:
        assert step.screenshot is not None and step.screenshot_clip is not None
        image = Image.open(summary.directory / step.screenshot).convert("RGB")
        clip = step.screenshot_clip
        # the task's 160x210 area and a margin, not the 1280x720 viewport
        assert image.size == (round(clip.width), round(clip.height))
        assert 160 <= image.width <= 180 and 210 <= image.height <= 230
        # the box is where the element is drawn in the cut image: on the task's white
        # area, inside the image, away from the grey backdrop
        box = step.target_box
        assert box is not None
        assert box.x >= 0 and box.x + box.width <= image.width
        assert box.y >= 0 and box.y + box.height <= image.height
        middle = image.getpixel((int(box.x + box.width / 2), int(box.y + box.height / 2)))
        assert middle != BACKDROP
        if step.index == 1:
            assert middle not in NOT_THE_BUTTON, middle

    # a web page's screenshot is the whole viewport, as before
    web = await run_episode(
        WebTask(id="form", url=pages.url("form.html"), goal="Look", max_steps=1),
        resources_of(browser, FunctionModel.answering(["<action>noop(1)</action>"])),
        tmp_path / "web", config)
    assert web.directory is not None
    [page_step] = read_steps(web.directory)
    assert page_step.screenshot is not None and page_step.screenshot_clip is None
    whole = Image.open(io.BytesIO((web.directory / page_step.screenshot).read_bytes()))
    assert whole.size == (1280, 720)

    # the viewer shows the task large, with the box over the Submit button
    shown, drawn = await shown_and_boxed(session, summary.directory, 1)
    assert shown["width"] >= 400  # the task reads at the panel's width
    scale = shown["width"] / image.width
    box = steps[1].target_box
    assert box is not None
    assert abs(drawn["x"] - (shown["x"] + box.x * scale)) < 3
    assert abs(drawn["y"] - (shown["y"] + box.y * scale)) < 3
    SHOTS.mkdir(exist_ok=True)
    await session.page.screenshot(path=str(SHOTS / "miniwob-cropped-episode.png"))

@pytest.mark.slow
async def test_browsergym_miniwob_screenshots_are_cut_to_the_task_too(
    browser: Browser, miniwob_server: MiniWoBServer, session: BrowserSession, tmp_path: Path,
) -> None:
    """BrowserGym's MiniWoB++ shows the task's yellow query above its area, and shoots
    it at its own scale (a 332x214 viewport zoomed out, captured at 1.5): the cut keeps
    both, in proportion to the part of the viewport it shows, and the box follows."""
    pytest.importorskip("browsergym.miniwob", reason="pip install browsergym-miniwob")
    resources = resources_of(browser, FunctionModel(solver), miniwob_server)
    task = BrowserGymTask(browsergym="miniwob.enter-text", seed=1, max_steps=3)
    summary = await run_episode(task, resources, tmp_path, EpisodeConfig(screenshots=True))
    assert summary.success is True and summary.directory is not None
    steps = read_steps(summary.directory)
    for step in steps:
        assert step.screenshot is not None and step.screenshot_clip is not None
        image = Image.open(summary.directory / step.screenshot).convert("RGB")
        clip = step.screenshot_clip
        assert 160 <= clip.width <= 180 and 210 <= clip.height <= 230
        assert abs(image.width / image.height - clip.width / clip.height) < 0.05
        assert (255, 255, 0) in {color for _, color in image.getcolors(1 << 16) or []}
    box = steps[-1].target_box
    assert box is not None
    scale = image.width / clip.width
    middle = image.getpixel((int((box.x + box.width / 2) * scale),
                             int((box.y + box.height / 2) * scale)))
    assert middle not in NOT_THE_BUTTON, middle
    # the viewer scales the box by the CSS pixels the image stands for
    shown, drawn = await shown_and_boxed(session, summary.directory, len(steps) - 1)
    css = shown["width"] / clip.width
    assert abs(drawn["x"] - (shown["x"] + box.x * css)) < 3
    assert abs(drawn["width"] - box.width * css) < 3
    await session.page.screenshot(path=str(SHOTS / "browsergym-miniwob-cropped-episode.png"))
