"""``linewise snapshot URL``: save a live page's AXTree as a filter-eval case skeleton."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from linewise.cli.commands import summary
from linewise.cli.display import require_display
from linewise.cli.flags import add_browser_flags, settings_from_args
from linewise.errors import BrowserError

if TYPE_CHECKING:
    from linewise.runtime.browser.chromium import BrowserConfig

# What the command runs (Playwright, Chromium) is imported by ``cmd_snapshot``, so that
# ``linewise snapshot --help`` appears at once.

SCHEMES = ("http", "https", "file")
"""The URLs snapshot reads; a path of a local file is read as its ``file:`` URL."""


def page_url(text: str) -> str:
    """argparse ``type`` of the page: a URL of ``SCHEMES``, or a local file's path."""
    scheme = urlsplit(text).scheme.lower()
    if scheme in SCHEMES:
        return text
    path = Path(text)
    if not scheme and path.is_file():
        return path.resolve().as_uri()
    if not scheme:
        raise argparse.ArgumentTypeError(f"{text!r}: no such file, and not a URL (give "
                                         f"{_accepted()})")
    raise argparse.ArgumentTypeError(f"{text!r}: {scheme}: URLs are not read (give "
                                     f"{_accepted()})")


def _accepted() -> str:
    return f"an {', '.join(SCHEMES[:-1])} or {SCHEMES[-1]} URL, or the path of a local file"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    snapshot = sub.add_parser("snapshot", help=summary("snapshot"))
    snapshot.add_argument("url", type=page_url, metavar="URL",
                          help=f"the page to read: {_accepted()}")
    snapshot.add_argument("--goal", default="TODO: the goal", help="the case's goal")
    snapshot.add_argument("--id", help="case id (default: from the URL)")
    snapshot.add_argument("--out", type=Path, help="output file (default: <id>.json)")
    add_browser_flags(snapshot, acting=False)  # it reads the page, it does not act
    snapshot.set_defaults(handler=cmd_snapshot)


async def page_lines(url: str, config: BrowserConfig) -> list[str]:
    from playwright.async_api import Error as PlaywrightError

    from linewise.runtime.browser.chromium import Browser
    from linewise.runtime.browser.extraction import observe

    async with Browser(config) as browser:
        session = await browser.new_session()
        try:
            try:
                await session.page.goto(url)
            except PlaywrightError as exc:  # unreachable, refused, not found
                raise BrowserError(f"{url}: {exc.message.splitlines()[0]}") from exc
            obs = await observe(session, screenshot=False)
        finally:
            await session.close()
        return obs.lines


def cmd_snapshot(args: argparse.Namespace) -> int:
    from linewise.apps.filter_eval import snapshot_case
    from linewise.runtime.browser.chromium import BrowserConfig
    from linewise.runtime.trace import safe_name

    settings = settings_from_args(args, resolve=False)
    require_display(args, settings)
    lines = asyncio.run(page_lines(args.url, BrowserConfig.from_settings(settings.browser)))
    case_id = args.id or safe_name(args.url.split("://", 1)[-1])
    out = args.out or Path(f"{case_id}.json")
    case = snapshot_case(case_id, args.url, args.goal, lines)
    out.write_text(case.model_dump_json(indent=2))
    print(f"{out}: {len(lines)} lines; add the gold bids the next action needs to gold_bids")
    return 0
