"""Shared fixtures: one real Chromium for the session, local pages, a fresh context per test."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from linewise.runtime.browser.chromium import Browser, BrowserSession
from linewise.runtime.log import configure_logging
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.testing import StaticServer
from tests.support.leaky import leaky_servers  # noqa: F401 (a fixture shared by policy tests)
from tests.support.replays import replay_episodes  # noqa: F401 (shared by viewer and report)
from tests.support.sites import sites  # noqa: F401 (a fixture shared by policy tests)

DATA = Path(__file__).parent / "data"

configure_logging(json_lines=False, level="WARNING")

# CI replays the same examples every run (a red build must be reproducible); locally
# hypothesis explores new ones each time.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def pages() -> Iterator[StaticServer]:
    """tests/data/pages served on localhost."""
    with StaticServer(DATA / "pages") as server:
        yield server


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    async with Browser() as shared:
        yield shared


@pytest.fixture
async def session(browser: Browser) -> AsyncIterator[BrowserSession]:
    fresh = await browser.new_session()
    try:
        yield fresh
    finally:
        await fresh.close()


@pytest.fixture(scope="session")
async def miniwob_server() -> AsyncIterator[MiniWoBServer]:
    async with MiniWoBServer() as server:
        yield server
