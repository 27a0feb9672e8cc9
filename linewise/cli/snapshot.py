"""``linewise snapshot URL``: save a live page's AXTree as a filter-eval case skeleton."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from linewise.apps.filter_eval import snapshot_case
from linewise.cli.commands import summary
from linewise.cli.flags import add_browser_flags, settings_from_args
from linewise.runtime.browser.chromium import Browser, BrowserConfig
from linewise.runtime.browser.extraction import observe
from linewise.runtime.trace import safe_name


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    snapshot = sub.add_parser("snapshot", help=summary("snapshot"))
    snapshot.add_argument("url", help="the page to read (http or https)")
    snapshot.add_argument("--goal", default="TODO: the goal", help="the case's goal")
    snapshot.add_argument("--id", help="case id (default: from the URL)")
    snapshot.add_argument("--out", type=Path, help="output file (default: <id>.json)")
    add_browser_flags(snapshot, acting=False)  # it reads the page, it does not act
    snapshot.set_defaults(handler=cmd_snapshot)


async def page_lines(url: str, config: BrowserConfig) -> list[str]:
    async with Browser(config) as browser:
        session = await browser.new_session()
        try:
            await session.page.goto(url)
            obs = await observe(session, screenshot=False)
        finally:
            await session.close()
        return obs.lines


def cmd_snapshot(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, resolve=False)
    lines = asyncio.run(page_lines(args.url, BrowserConfig.from_settings(settings.browser)))
    case_id = args.id or safe_name(args.url.split("://", 1)[-1])
    out = args.out or Path(f"{case_id}.json")
    case = snapshot_case(case_id, args.url, args.goal, lines)
    out.write_text(case.model_dump_json(indent=2))
    print(f"{out}: {len(lines)} lines; add the gold bids the next action needs to gold_bids")
    return 0
