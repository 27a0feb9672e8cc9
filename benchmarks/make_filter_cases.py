"""Build the shipped filter-eval cases in tasks/filter-cases/ from real pages.

MiniWoB++ cases: the task is started with a seed, its AXTree saved, and the gold is
the elements its solution acts on (derived from the goal by the rules below). Docs
cases: pages of Debian's python3-doc served on localhost, with a goal whose answer is a
known part of the page; the gold is the lines that hold it.

    python benchmarks/make_filter_cases.py [--out tasks/filter-cases]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
import threading
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from linewise.runtime.browser.chromium import Browser
from linewise.runtime.browser.extraction import observe
from linewise.runtime.filter_eval import FilterCase
from linewise.runtime.tasks.miniwob import start_miniwob_episode
from linewise.runtime.tasks.miniwob_server import MiniWoBServer

DOCS = Path("/usr/share/doc/python3-doc/html")
BID = re.compile(r"\[([A-Za-z0-9]+)\] ")


def bids_matching(lines: list[str], pattern: str, limit: int = 10) -> list[str]:
    found = []
    for line in lines:
        if re.search(pattern, line) and (m := BID.search(line)):
            found.append(m.group(1))
    return found[:limit]


def quoted(goal: str) -> list[str]:
    return re.findall(r'"([^"]+)"', goal)


def gold_click_button(goal: str, lines: list[str]) -> list[str]:
    return bids_matching(lines, rf"button '{re.escape(quoted(goal)[0])}'")


def gold_click_link(goal: str, lines: list[str]) -> list[str]:
    target = quoted(goal)[0]
    for i, line in enumerate(lines):
        if f"StaticText '{target}'" in line:
            for back in range(i, -1, -1):
                if (m := BID.search(lines[back])) and "clickable" in lines[back]:
                    return [m.group(1)]
    return bids_matching(lines, rf"link '{re.escape(target)}'")


def gold_enter_text(goal: str, lines: list[str]) -> list[str]:
    return bids_matching(lines, r"textbox") + bids_matching(lines, r"button 'Submit'")


def gold_checkboxes(goal: str, lines: list[str]) -> list[str]:
    words = re.findall(r"Select (.*?) and click Submit", goal)[0].replace(",", " ").split()
    labels = [w for w in words if w not in ("and", "nothing")]
    gold = []
    for label in labels:
        for i, line in enumerate(lines):
            if f"'{label}'" in line:
                for near in range(i, max(-1, i - 3), -1):
                    if "checkbox" in lines[near] and (m := BID.search(lines[near])):
                        gold.append(m.group(1))
                        break
                break
    return gold + bids_matching(lines, r"button 'Submit'")


def gold_login(goal: str, lines: list[str]) -> list[str]:
    return bids_matching(lines, r"textbox") + bids_matching(lines, r"button 'Login'")


def gold_social_reply(goal: str, lines: list[str]) -> list[str]:
    user = re.search(r"@\w+", goal).group(0)  # type: ignore[union-attr]
    start = next(i for i, line in enumerate(lines) if f"'{user}'" in line)
    # the post's action icons follow its text, Reply first; they have no accessible name
    for line in lines[start:]:
        if m := BID.search(line):
            return [m.group(1)]
    return []


def gold_book_flight(goal: str, lines: list[str]) -> list[str]:
    return bids_matching(lines, r"textbox") + bids_matching(lines, r"button 'Search'")


MINIWOB: list[tuple[str, int, Callable[[str, list[str]], list[str]]]] = [
    ("click-button", 3, gold_click_button),
    ("click-button", 11, gold_click_button),
    ("click-link", 2, gold_click_link),
    ("enter-text", 0, gold_enter_text),
    ("click-checkboxes", 2, gold_checkboxes),
    ("login-user", 1, gold_login),
    ("social-media", 3, gold_social_reply),
    ("book-flight", 0, gold_book_flight),
]

# (page, goal, regex of the gold lines: the element the answer or the next click needs)
DOC_CASES = [
    ("library/secrets.html", "Find how to generate a secure random URL-safe text token.",
     r"term 'secrets\.token_urlsafe"),
    ("library/glob.html", "Open the documentation of the function that escapes special "
     "characters in a glob pattern.", r"term 'glob\.escape"),
    ("library/fnmatch.html", "Which function returns the subset of a list of names that "
     "match a pattern? Open its documentation.", r"term 'fnmatch\.filter"),
    ("library/bisect.html", "Go to the section about searching sorted lists.",
     r"(heading|link) 'Searching Sorted Lists'"),
]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(root: Path) -> str:
    handler = functools.partial(_Quiet, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/"


async def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cases: list[dict[str, Any]] = []
    async with Browser() as browser, MiniWoBServer() as miniwob:
        for name, seed, rule in MINIWOB:
            session = await browser.new_session()
            goal = await start_miniwob_episode(session.page, name, seed, miniwob)
            obs = await observe(session, screenshot=False)
            await session.close()
            gold = rule(goal, obs.lines)
            assert gold, f"no gold for {name} seed {seed}: {goal}"
            case = FilterCase(id=f"miniwob.{name}.seed{seed}", source=f"miniwob:{name}",
                              goal=goal, lines=obs.lines, gold_bids=gold)
            cases.append(case.model_dump())
            print(f"{case.id}: {len(obs.lines)} lines, gold {gold}")
        if DOCS.exists():
            base = serve(DOCS.resolve())
            for page, goal, pattern in DOC_CASES:
                session = await browser.new_session()
                await session.page.goto(base + page)
                obs = await observe(session, screenshot=False)
                await session.close()
                gold_lines = [i + 1 for i, line in enumerate(obs.lines) if re.search(pattern, line)]
                assert gold_lines, f"no gold in {page} for {pattern}"
                case = FilterCase(id=f"docs.{Path(page).stem}", source=f"python3-doc:{page}",
                                  goal=goal, lines=obs.lines, gold_lines=gold_lines[:6])
                cases.append(case.model_dump())
                print(f"{case.id}: {len(obs.lines)} lines, gold lines {case.gold_lines}")
    for case in cases:
        (out / f"{case['id']}.json").write_text(FilterCase.model_validate(case).model_dump_json(
            indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tasks/filter-cases"))
    asyncio.run(build(parser.parse_args().out))


if __name__ == "__main__":
    main()
