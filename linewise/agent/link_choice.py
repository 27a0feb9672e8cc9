"""Choosing the link to open, when the goal asks to open something and the action does
not click a link.

On documentation pages whose view showed ``[1154] link 'ELLIPSIS', url='…#doctest.
ELLIPSIS'``, the embedded model asked to "Open the entry of doctest's ELLIPSIS option
flag" clicked the search form five times and hovered once (benchmarks/NOTES.md). Picking
one id out of a 3,000-token tree is a hard reading task for a 1.5B model; picking one
out of eight links, each with its name and where it goes, is a short one.

When the goal asks to open, visit or go to something (:func:`asks_to_open`) and the
step's action is not a click on a link, the view's links are ranked by the words they
share with the goal and the reasoning (name and URL: an anchor such as
``#asyncio.to_thread`` names the entry it opens), and the model is asked, in a short
separate conversation under a JSON schema whose only values are those links' ids and
null, which one opens what the goal asks for. A chosen link is clicked instead.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from linewise.agent.answer_check import asks_a_question
from linewise.agent.models import ChatModel
from linewise.agent.structured import Constraint, ask_structured
from linewise.axtree import AXLine, parse_line
from linewise.errors import ResponseFormatError
from linewise.prompts import render_prompt
from linewise.records import LLMCall

CANDIDATES = 8
"""Links the model chooses among, at most."""

_OPEN = re.compile(r"\b(open|go to|navigate to|visit|follow|take me to|bring up)\b",
                   re.IGNORECASE)
_WORDS = re.compile(r"[a-z0-9]+")
_STOP_TEXT = """a an the and or of to in on for with by at from as is are be it its this that
which what who how when where do does can i you me my open entry page go visit navigate
follow link"""
_STOP = frozenset(_STOP_TEXT.split())


def asks_to_open(goal: str) -> bool:
    """Whether the goal asks to open, visit or go to something (and not to be told)."""
    return bool(_OPEN.search(goal)) and not asks_a_question(goal)


def _words(text: str) -> set[str]:
    return {w for w in _WORDS.findall(text.lower()) if w not in _STOP and len(w) > 1}


def _where(url: str) -> str:
    """A link's destination as the model is shown it: the page's name and its anchor."""
    parts = urlsplit(url)
    page = unquote(parts.path.rstrip("/").rsplit("/", 1)[-1]) or parts.netloc
    return f"{page}#{unquote(parts.fragment)}" if parts.fragment else page


def _url_of(line: AXLine) -> str:
    for prop in line.properties:
        if prop.startswith("url="):
            return prop[4:].strip("'\"")
    return ""


def candidate_links(
    elements: Mapping[str, AXLine | None] | None, view_text: str, query: str,
    limit: int = CANDIDATES,
) -> list[tuple[str, str, str]]:
    """The view's links that share the most words with ``query``, best first, as
    (bid, name, destination); links sharing none are left out."""
    lines: list[AXLine] = []
    if elements is not None:
        lines = [line for line in elements.values() if line is not None]
    else:
        for raw in view_text.splitlines():
            try:
                lines.append(parse_line(raw))
            except ValueError:
                continue
    wanted = _words(query)
    links: dict[tuple[str, str], tuple[str, set[str]]] = {}
    for line in lines:
        if line.role == "link" and line.bid is not None:
            name, where = line.name or "", _where(_url_of(line))
            # the same link repeated down the page: the first stands for all
            links.setdefault((name, where), (line.bid, _words(name) | _words(where)))
    # a word every link has (the page's own name in each URL) tells links apart less
    df: dict[str, int] = {}
    for _bid, link_words in links.values():
        for word in link_words & wanted:
            df[word] = df.get(word, 0) + 1
    scored: list[tuple[float, int, tuple[str, str, str]]] = []
    for order, ((name, where), (bid, link_words)) in enumerate(links.items()):
        score = sum(math.log(1 + len(links) / df[word]) for word in link_words & wanted)
        if score:
            scored.append((-score, order, (bid, name, where)))
    return [link for *_rank, link in sorted(scored)[:limit]]


@dataclass
class LinkChoice:
    """What the choice found: the link to click, or none."""

    bid: str | None = None
    offered: list[str] = field(default_factory=list)
    calls: list[LLMCall] = field(default_factory=list)


def _reader(bids: list[str]) -> Callable[[str], str | None]:
    def read(text: str) -> str | None:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ResponseFormatError(f"Not JSON: {exc}. Reply with the JSON object only.") from exc
        bid = value.get("bid") if isinstance(value, dict) else None
        if bid is None:
            return None
        bid = str(bid).strip().strip("[]")
        if bid not in bids:
            raise ResponseFormatError(f"{bid!r} is not one of the ids listed: {', '.join(bids)}.")
        return bid
    return read


async def choose_link(
    model: ChatModel, goal: str, reasoning: str | None,
    elements: Mapping[str, AXLine | None] | None, view_text: str, *, retries: int = 1,
) -> LinkChoice:
    """Ask which of the best-matching links of the view opens what ``goal`` asks for."""
    links = candidate_links(elements, view_text, f"{goal} {reasoning or ''}")
    choice = LinkChoice(offered=[bid for bid, _name, _where in links])
    if not links:
        return choice
    bids = choice.offered
    listing = "\n".join(f"[{bid}] {name!r} → {where}" for bid, name, where in links)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"bid": {"anyOf": [{"enum": bids}, {"type": "null"}]}},
        "required": ["bid"],
    }

    def messages(constrained: bool) -> list[dict[str, Any]]:
        return [{"role": "user", "content": render_prompt(
            "link_choice.md", goal=goal, links=listing,
            answer_format="" if constrained else render_prompt("link_choice_format.md"))}]

    result = await ask_structured(
        model, messages, _reader(bids), constraint=Constraint.json_schema("link", schema),
        purpose="action", retries=retries, history="last", temperature=0,
        reask=lambda problem, _text: {"role": "user", "content": problem},
    )
    choice.calls = result.calls
    choice.bid = result.value
    return choice
