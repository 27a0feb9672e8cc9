"""Which elements of a view a pointer action can do something on, and which of those are
closest to the goal.

A click on a paragraph, a term or a code span does nothing unless the page listens for
it, and a new element each time repeats no call. Once the model has pointed at such an
element, it is told so with the clickable elements that share most words with the goal
(``prompt.pointed_at_nothing_note``), and under a grammar its pointer actions may name
only those (``policy``): told alone, a small model copies its last thought and picks
another element near the one it tried (docs/design.md, "Pointing at what answers no
click").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import is_pointer_target
from linewise.agent.text.bm25 import words
from linewise.axtree import AXLine, bid_of, element_lines, line_depth, parse_line

Elements = Mapping[str, AXLine | None]

_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*[\w]")
_ENTRY_HEAD = re.compile(r"^\t*\[[A-Za-z0-9]+\] (term|heading) ")
# Words a definition's term puts before the name it defines (Sphinx: "class enum.Flag",
# "exception ReferenceError", "async with", "@enum.unique").
_TERM_PREFIXES = frozenset({"class", "exception", "async", "await", "awaitable", "abstractmethod",
                            "classmethod", "staticmethod", "coroutine", "property", "method",
                            "function", "data", "attribute", "module"})


def inert_bids(calls: Iterable[ParsedAction], elements: Elements | None,
               clickable: frozenset[str]) -> list[str]:
    """The elements ``calls``' pointer actions named that answer no click (an element
    whose line is not known is given the benefit of the doubt)."""
    if elements is None:
        return []
    return [bid for call in calls if call.spec.pointer for bid in call.bids
            if (line := elements.get(bid)) is not None
            and not is_pointer_target(line, bid in clickable)]


def pointer_targets(elements: Elements, clickable: frozenset[str]) -> list[str]:
    """The elements a pointer action can do something on, in view order."""
    return [bid for bid, line in elements.items() if is_pointer_target(line, bid in clickable)]


def named_words(goal: str) -> set[str]:
    """The words of ``goal`` that name something the way code or a reference does
    (``asyncio.to_thread``, ``SHUT_RDWR``, ``ELLIPSIS``, ``RewriteMap``: a dot, an
    underscore, or a capital after the first letter), lower-cased."""
    return {word.lower() for word in _IDENTIFIER.findall(goal)
            if "." in word or "_" in word or any(c.isupper() for c in word[1:])}


def names_one_of(line: AXLine, named: set[str]) -> bool:
    """Whether the element is called by one of ``named``: its name (a call's ``()`` and
    a pilcrow set aside), or a link's ``#fragment`` or that fragment's last dotted part
    (``#doctest.ELLIPSIS``, Apache's lower-cased ``#rewritemap``)."""
    fragment = link_fragment(line).lower()
    name = (line.name or "").replace("¶", "").strip().removesuffix("()").lower()
    return bool(named & {name, fragment, fragment.rpartition(".")[2]} - {""})


def closest_targets(goal: str, elements: Elements, clickable: frozenset[str],
                    k: int = 5, page_url: str = "") -> list[str]:
    """Up to ``k`` elements a click can act on, closest to ``goal`` first: those the goal
    names (:func:`named_words`: a section link "Option Flags" shares more words with
    "doctest's ELLIPSIS option flag" than the link 'ELLIPSIS' does, and a model takes
    the first it is offered more often than any other), then most words shared with the
    goal (the name, and a link's ``#fragment``: a documentation entry's own name), in
    view order among equals. None that shares no word; one link per destination (a
    contents list, a sidebar and the text often link the same anchor); no link to
    ``page_url`` itself (a sidebar's link to the page's own title only reloads it)."""
    wanted = set(words(goal))
    named = named_words(goal)
    here = page_url.partition("#")[0]
    scored: list[tuple[bool, int, int, str]] = []
    destinations: set[str] = set()
    for order, (bid, line) in enumerate(elements.items()):
        if line is None or not is_pointer_target(line, bid in clickable):
            continue
        url = link_url(line)
        if (here and url == here) or url in destinations:
            continue
        shared = len(wanted & set(words(f"{line.name or ''} {link_fragment(line)}")))
        if shared:
            scored.append((not names_one_of(line, named), -shared, order, bid))
            if url:
                destinations.add(url)
    return [bid for *_, bid in sorted(scored)[:k]]


def offered_targets(goal: str, elements: Elements, clickable: frozenset[str],
                    entry_links: Iterable[str] = (), page_url: str = "") -> list[str]:
    """What a pointer action is offered after one named an element that answers no
    click: when that element lies in an entry with links to it (``entry_links``), the
    links the goal names (:func:`named_words`) and then those; else the clickable
    elements closest to the goal (:func:`closest_targets`). The goal's named link comes
    first because an entry's links alone include its neighbours' (the list beside
    ``importlib.reload`` links ``importlib.import_module`` too), and the first offered
    is the one most often taken."""
    closest = closest_targets(goal, elements, clickable, page_url=page_url)
    entry = list(entry_links)
    if not entry:
        return closest
    named = named_words(goal)
    return list(dict.fromkeys([
        *(bid for bid in closest if (line := elements[bid]) is not None
          and names_one_of(line, named)),
        *entry]))


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


def entry_links(lines: Sequence[str], bid: str, page_url: str, k: int = 2) -> list[str]:
    """Up to ``k`` links of the page (``lines``: the whole tree, unnumbered) that open the
    entry the element ``bid`` lies in: the reference entry (a definition's term) or the
    section (a heading) it belongs to, named the way the page's anchors are (the term's
    name, ``socket.create_connection``; a heading's first word, Apache's ``#pidfile``, or
    its title as a slug, ``#option-flags``). Exact names first, then a method's anchor
    under its class (``#….FileFinder.invalidate_caches``), in page order; one link per
    anchor.

    A click on an entry's description, its term or its list answers nothing, while a
    link to the entry's anchor elsewhere on the page opens it: these are the links that
    do what such a click pointed at."""
    index = next((i for i, line in enumerate(lines) if bid_of(line) == bid), None)
    if index is None:
        return []
    head = _entry_head(lines, index)
    if head is None or not head.name:
        return []
    name = head.name.replace("¶", "").strip()
    words = [w for w in _IDENTIFIER.findall(name.lstrip("@")) if w.lower() not in _TERM_PREFIXES]
    if not words:
        return []
    primary = words[0].lower()
    exact = {primary, re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")}
    here = page_url.partition("#")[0]
    found: list[tuple[int, int, str, str]] = []
    for order, line in enumerate(lines):
        if "] link " not in line or (link_bid := bid_of(line)) is None or link_bid == bid:
            continue
        url = link_url(parse_line(line))
        page, _, fragment = url.partition("#")
        if not fragment or (page and here and page != here):
            continue
        fragment = fragment.lower()
        if fragment in exact:
            found.append((0, order, fragment, link_bid))
        elif ("." in primary or "(" in name) and fragment.endswith("." + primary):
            found.append((1, order, fragment, link_bid))
    chosen: dict[str, str] = {}  # one link per anchor: a contents list and the text repeat it
    for *_, fragment, link_bid in sorted(found):
        chosen.setdefault(fragment, link_bid)
    return list(chosen.values())[:k]


def pointed_entry_links(call: ParsedAction | None, lines: Sequence[str],
                        clickable: frozenset[str], page_url: str) -> dict[str, AXLine]:
    """The links (with their lines) that open the entries ``call``, a pointer action,
    pointed into, where what it pointed at answers no click (:func:`entry_links`)."""
    if call is None or not call.spec.pointer:
        return {}
    pointed = element_lines(lines, call.bids)
    links = [link for bid in inert_bids([call], pointed, clickable)
             for link in entry_links(lines, bid, page_url)]
    found = element_lines(lines, links)
    return {bid: found[bid] for bid in dict.fromkeys(links) if bid in found}


def _entry_head(lines: Sequence[str], index: int) -> AXLine | None:
    """The term or heading that opens the entry line ``index`` lies in: the line itself,
    a definition list's first term, or else the closest one before it."""
    element = parse_line(lines[index])
    if element.role in ("term", "heading"):
        return element
    if element.role == "DescriptionList":
        for line in lines[index + 1:]:
            if line_depth(line) <= element.depth:
                break
            if _ENTRY_HEAD.match(line):
                return parse_line(line)
    for line in reversed(lines[:index]):
        if _ENTRY_HEAD.match(line):
            return parse_line(line)
    return None
