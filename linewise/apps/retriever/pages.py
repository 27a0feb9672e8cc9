"""Page snapshots for training: documentation folders read by real Chromium.

Each folder (``/usr/share/doc/<package>`` or any folder of HTML pages) is served from its
parent on a local port, so a page's URL names its family (:func:`.sources.page_family`),
and up to ``per_family`` of its pages, drawn with a seed, are opened and observed exactly
as an agent's step observes them. Reserved and evaluation families are refused before a
page is opened (:func:`.sources.check_family`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from linewise.apps.retriever.sources import PageSnapshot, check_family
from linewise.errors import ConfigError
from linewise.runtime.browser.chromium import Browser, BrowserConfig
from linewise.runtime.browser.extraction import observe
from linewise.runtime.static_server import StaticServer

log = structlog.get_logger(__name__)

__all__ = ["snapshot_folders"]

_MIN_LINES = 20
"""Pages shorter than this (redirects, empty indexes) teach nothing."""


def _pages(folder: Path, per_family: int, seed: int) -> list[Path]:
    pages = sorted(p for p in folder.rglob("*.html") if p.is_file())
    random.Random(f"{seed}:{folder.name}").shuffle(pages)
    return pages[:per_family]


async def snapshot_folders(folders: Sequence[Path], *, per_family: int = 30, seed: int = 0,
                           allow_evaluation: bool = False,
                           config: BrowserConfig | None = None,
                           progress: Callable[[str], None] | None = None,
                           ) -> list[PageSnapshot]:
    """Snapshots of up to ``per_family`` pages of each folder (``progress`` is told of
    each folder as it is done).

    Raises:
        ConfigError: a folder does not exist, holds no HTML page, or is of a refused
            family.
    """
    plan: list[tuple[Path, list[Path]]] = []
    for folder in folders:
        folder = folder.resolve()
        check_family(folder.name, str(folder), allow_evaluation=allow_evaluation)
        if not folder.is_dir():
            raise ConfigError(f"{folder}: not a folder of HTML pages")
        pages = _pages(folder, per_family, seed)
        if not pages:
            raise ConfigError(f"{folder}: holds no .html page")
        plan.append((folder, pages))
    snapshots: list[PageSnapshot] = []
    async with Browser(config or BrowserConfig()) as browser:
        for folder, pages in plan:
            with StaticServer(folder.parent) as server:
                session = await browser.new_session()
                try:
                    for page in pages:
                        url = server.url(page.relative_to(folder.parent).as_posix())
                        try:
                            await session.page.goto(url)
                            observation = await observe(session, screenshot=False)
                        except Exception as exc:  # a page that fails to load is skipped, logged
                            log.warning("page not read", url=url, error=repr(exc))
                            continue
                        if len(observation.lines) >= _MIN_LINES:
                            snapshots.append(PageSnapshot(
                                url=url, family=folder.name, lines=observation.lines,
                                title=await session.page.title()))
                finally:
                    await session.close()
            if progress is not None:
                kept = sum(1 for s in snapshots if s.family == folder.name)
                progress(f"{folder.name}: {kept} of {len(pages)} pages read")
    return snapshots
