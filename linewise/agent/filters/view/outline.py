"""The page's outline: the lines that say how a page is organised and where to act.

Headings, landmarks (navigation, main, search, banner…), forms and their fields,
search boxes, table headers, tabs and dialogs, and the ``term`` lines of definition
lists (every function of a documentation page is one). Read with
:func:`linewise.axtree.parse_line`; cheap on any page.

The ``focus`` filter shows the outline lines it did not pick as candidates in a
compact form (bid, role and a shortened name), so the retriever model knows what the
rest of the page holds without reading it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from linewise.axtree import AXLine, parse_line

__all__ = ["OUTLINE_KINDS", "OutlineEntry", "outline_entries", "outline_of"]

OUTLINE_KINDS: dict[str, str] = {
    "heading": "heading",
    "navigation": "landmark", "main": "landmark", "banner": "landmark",
    "contentinfo": "landmark", "complementary": "landmark", "region": "landmark",
    "search": "search", "searchbox": "search",
    "form": "form", "textbox": "form", "combobox": "form", "listbox": "form",
    "checkbox": "form", "radio": "form", "spinbutton": "form", "slider": "form",
    "switch": "form", "button": "form",
    "columnheader": "table", "rowheader": "table", "table": "table", "grid": "table",
    "tablist": "tab", "tab": "tab", "menubar": "tab", "menu": "tab",
    "dialog": "dialog", "alertdialog": "dialog", "alert": "dialog",
    "term": "term",
}
"""Roles in the outline, and the outline kind each one counts as."""

# The order kinds are given room in when the outline must be cut to fit: what a user
# acts on or navigates by first, long lists of terms last.
KIND_PRIORITY = ("search", "dialog", "heading", "landmark", "form", "tab", "table", "term")


@dataclass(frozen=True)
class OutlineEntry:
    index: int
    """0-based line index."""
    kind: str
    role: str
    depth: int


def outline_entries(lines: Sequence[str]) -> list[OutlineEntry]:
    """Every outline line of the page, in page order."""
    return outline_of(parse_line(line) for line in lines)


def outline_of(parsed_lines: Iterable[AXLine]) -> list[OutlineEntry]:
    """Every outline line of a page already read into its parts, in page order."""
    found: list[OutlineEntry] = []
    for index, parsed in enumerate(parsed_lines):
        kind = OUTLINE_KINDS.get(parsed.role)
        if kind is None:
            continue
        if kind == "form" and parsed.bid is None:
            continue  # an unmarked field cannot be acted on
        if kind == "form" and "search" in (parsed.name or "").lower():
            kind = "search"  # a site's search box, whatever its role
        found.append(OutlineEntry(index, kind, parsed.role, parsed.depth))
    return found


def by_priority(entries: Sequence[OutlineEntry]) -> list[OutlineEntry]:
    """Entries in the order they get room: by kind priority, then page order."""
    rank = {kind: i for i, kind in enumerate(KIND_PRIORITY)}
    return sorted(entries, key=lambda e: (rank.get(e.kind, len(rank)), e.index))
