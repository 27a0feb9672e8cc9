"""Where the last action took the agent: candidate lines from the history's structure.

A multistep goal ("open the Mapping Types section, then find the method that removes a
key") is done in parts, and the part after the first action happens where that action
led. Lexical matching over a 20,000-line page does not know that; the page does:

- a **followed section**: the last action clicked a link to a place in this page (its
  URL has a fragment) and a heading names the same thing as the link. The heading, the
  best lexical hits *inside that section*, and the section's own entries (terms,
  headings, fields) are proposed, in that order;
- the **neighbourhood** of the element the last action named: its largest enclosing
  container of at most ``neighbourhood_lines`` lines (a pagination bar, a form group, a
  toolbar), since the next control is often beside the one just used ("Next" was
  clicked; the page number is two links away).

No model, no embedding: a few milliseconds on any page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from linewise.agent.filters.base import FilterInput, query_text
from linewise.agent.filters.stages.context_embedding import Unit
from linewise.agent.filters.view.items import section_of
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.bm25 import LineRanker, with_context
from linewise.axtree import bid_of

__all__ = ["followed_section", "history_groups", "last_element", "same_title"]

_NUMBERING = re.compile(r"^\s*(?:[0-9]+(?:\.[0-9]+)*\.?|[ivxlc]+\.)\s+", re.IGNORECASE)
_SECTION_ENTRY_ROLES = frozenset({"term", "heading", "textbox", "combobox", "button",
                                  "checkbox", "radio", "columnheader"})


def _title_key(name: str) -> str:
    text = name.replace("¶", " ").replace("\u00b6", " ").strip().lower()
    return " ".join(_NUMBERING.sub("", text).split())


def same_title(link: str, heading: str) -> bool:
    """Whether a link's text and a heading name the same section: equal once numbering,
    pilcrows and spacing are set aside, or the heading starts with the link's text (a
    contents entry may shorten a long title)."""
    a, b = _title_key(link), _title_key(heading)
    return bool(a) and (a == b or (len(a) >= 4 and b.startswith(a)))


def last_element(tree: LineTree, observation: FilterInput) -> int | None:
    """The 0-based line of the element the last action named, if it is on this page."""
    if not observation.history:
        return None
    for bid in observation.history[-1].bids:
        if bid in tree.bid_line:
            return tree.bid_line[bid]
    return None


def followed_section(tree: LineTree, observation: FilterInput) -> range | None:
    """The section of this page the last action's in-page link leads to."""
    acted = last_element(tree, observation)
    if acted is None:
        return None
    link = tree.parsed(acted)
    url = next((p for p in link.properties if p.startswith("url=")), "")
    if link.role != "link" or "#" not in url or not link.name:
        return None
    for index in range(len(tree)):
        if index != acted and "heading" in tree.lines[index]:
            line = tree.parsed(index)
            if line.role == "heading" and line.name and same_title(link.name, line.name):
                return section_of(tree, index, tree.roles)
    return None


def history_groups(
    tree: LineTree, ranker: LineRanker, observation: FilterInput, *, context: int = 2,
    hits: int = 8, entries: int = 40, neighbourhood_lines: int = 40,
    passages: tuple[Sequence[Unit], LineRanker] | None = None, passage_hits: int = 4,
) -> list[tuple[int, ...]]:
    """Candidate groups (0-based lines), best first: the followed section's heading,
    its best passages (``passages``: the page's units and their index), its best
    lexical hits and its entries, then the last element's neighbourhood."""
    groups: list[tuple[int, ...]] = []
    section = followed_section(tree, observation)
    if section is not None:
        n = len(tree)
        groups.append(tuple(with_context(section.start, n, context)))
        query = query_text(observation)
        if passages is not None:
            units, unit_ranker = passages
            unit_scores = unit_ranker.scores(query)
            best = sorted((k for k, unit in enumerate(units)
                           if unit.index in section and unit_scores[k] > 0),
                          key=lambda k: (-unit_scores[k], k))
            groups.extend(tuple(sorted({units[k].anchor, *with_context(units[k].index, n, 1)}))
                          for k in best[:passage_hits])
        scores = ranker.scores(query)
        inside = sorted((i for i in section if scores[i] > 0), key=lambda i: (-scores[i], i))
        groups.extend(tuple(with_context(i, n, context)) for i in inside[:hits])
        listed = [i for i in section if i != section.start
                  and tree.roles[i] in _SECTION_ENTRY_ROLES][:entries]
        groups.extend((i,) for i in listed)
    acted = last_element(tree, observation)
    if acted is not None:
        groups.extend(_neighbourhood(tree, acted, neighbourhood_lines))
    return groups


def _neighbourhood(tree: LineTree, acted: int, max_lines: int) -> list[tuple[int, ...]]:
    """The largest container around ``acted`` of at most ``max_lines`` lines; when that
    holds no other element (a list item of a long list), the lines within
    ``max_lines / 2`` of ``acted`` inside the next larger container."""
    container = acted
    larger = -1
    for ancestor in tree.ancestors(acted):
        if tree.subtree_end[ancestor] - ancestor > max_lines:
            larger = ancestor
            break
        container = ancestor
    span = range(container, tree.subtree_end[container])
    acted_span = range(acted, tree.subtree_end[acted])
    others = [i for i in span if i not in acted_span and bid_of(tree.lines[i])]
    if len(others) < 2 and larger >= 0:
        half = max_lines // 2
        span = range(max(larger, acted - half), min(tree.subtree_end[larger], acted + half))
    return [tuple(span)] if len(span) > 1 else []
