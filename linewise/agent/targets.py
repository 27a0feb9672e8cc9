"""Which elements of a view a pointer action can do something on, and which of those are
closest to the goal.

A click on a paragraph, a term or a code span does nothing unless the page listens for
it. Asked to open a documentation entry, the 1.5B model clicked the entry's paragraphs
and code spans one after another (a new element each time, so no call repeated) while
the link that opens the entry was in its view. Once it has pointed at such an element,
it is told so with the clickable elements that share most words with the goal
(``prompt.pointed_at_nothing_note``), and under a grammar its pointer actions may name
only those (``policy``): told alone, it copied its last thought and, picking an id digit
by digit among every clickable element, took the link whose id began like the
paragraph's (``click('2424')``, the glossary's GIL, after ``click('2416')``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import POINTER_ACTIONS, is_pointer_target
from linewise.agent.filters.bm25 import words
from linewise.axtree import AXLine

Elements = Mapping[str, AXLine | None]


def inert_bids(calls: Iterable[ParsedAction], elements: Elements | None,
               clickable: frozenset[str]) -> list[str]:
    """The elements ``calls``' pointer actions named that answer no click (an element
    whose line is not known is given the benefit of the doubt)."""
    if elements is None:
        return []
    return [bid for call in calls if call.name in POINTER_ACTIONS for bid in call.bids
            if (line := elements.get(bid)) is not None
            and not is_pointer_target(line, bid in clickable)]


def pointer_targets(elements: Elements, clickable: frozenset[str]) -> list[str]:
    """The elements a pointer action can do something on, in view order."""
    return [bid for bid, line in elements.items() if is_pointer_target(line, bid in clickable)]


def closest_targets(goal: str, elements: Elements, clickable: frozenset[str],
                    k: int = 5, page_url: str = "") -> list[str]:
    """Up to ``k`` elements a click can act on, most words shared with ``goal`` first
    (the name, and a link's ``#fragment``: a documentation entry's own name), in view
    order among equals; none that shares no word, and no link to ``page_url`` itself
    (a sidebar's link to the page's own title only reloads it)."""
    wanted = set(words(goal))
    here = page_url.partition("#")[0]
    scored: list[tuple[int, int, str]] = []
    for order, (bid, line) in enumerate(elements.items()):
        if line is None or not is_pointer_target(line, bid in clickable):
            continue
        if here and link_url(line) == here:
            continue
        shared = len(wanted & set(words(f"{line.name or ''} {link_fragment(line)}")))
        if shared:
            scored.append((-shared, order, bid))
    return [bid for _, _, bid in sorted(scored)[:k]]


def link_url(line: AXLine) -> str:
    """The URL a line shows (``url='…'``); "" for none."""
    return next((p[5:-1] for p in line.properties if p.startswith("url=")), "")


def leads_to(bids: Iterable[str], elements: Elements | None, url: str) -> bool:
    """Whether one of the elements is a link to exactly ``url`` (fragment included)."""
    return elements is not None and any(
        (line := elements.get(bid)) is not None and link_url(line) == url
        for bid in bids)


def link_fragment(line: AXLine) -> str:
    """The part of a link's URL after ``#``; "" for anything else."""
    return link_url(line).partition("#")[2]


def target_text(line: AXLine) -> str:
    """``[33] link 'to_thread()' (#asyncio.to_thread)``."""
    fragment = link_fragment(line)
    return line.head(max_name=60) + (f" (#{fragment})" if fragment else "")
