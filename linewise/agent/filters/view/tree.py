"""The tree hidden in the flattened AXTree lines: depth, parent, subtree, bid of each line.

Indices here are 0-based positions in ``lines``; the numbers models see are 1-based
(line ``n`` is ``lines[n - 1]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from linewise.axtree import AXLine, bid_of, line_depth, parse_line


@dataclass
class LineTree:
    """Structure of indented AXTree lines (one tab per level, as BrowserGym writes them)."""

    lines: list[str]
    known: dict[str, AXLine] = field(default_factory=dict, repr=False, compare=False)
    """Lines already read, by text. The tree of a page that follows another may start
    with what its predecessor read (:class:`..stages.page_index.PageIndex`), so a page that
    changed little is not read again."""
    depth: list[int] = field(init=False)
    parent: list[int] = field(init=False)
    """Index of each line's parent, -1 for top-level lines."""
    subtree_end: list[int] = field(init=False)
    """One past the last line of each line's subtree."""
    bid_line: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.lines)
        self.depth = [line_depth(line) for line in self.lines]
        self.parent = [-1] * n
        self.subtree_end = [n] * n
        self.bid_line = {}
        stack: list[int] = []
        for i, depth in enumerate(self.depth):
            while stack and self.depth[stack[-1]] >= depth:
                self.subtree_end[stack.pop()] = i
            self.parent[i] = stack[-1] if stack else -1
            stack.append(i)
            bid = bid_of(self.lines[i])
            if bid is not None:
                self.bid_line.setdefault(bid, i)

    def __len__(self) -> int:
        return len(self.lines)

    def ancestors(self, index: int) -> list[int]:
        """Parent, grandparent, … up to the top (nearest first)."""
        chain = []
        index = self.parent[index]
        while index >= 0:
            chain.append(index)
            index = self.parent[index]
        return chain

    def children(self, index: int) -> list[int]:
        return [i for i in range(index + 1, self.subtree_end[index]) if self.parent[i] == index]

    def parsed(self, index: int) -> AXLine:
        """Line ``index`` read into its parts (once per distinct text)."""
        text = self.lines[index]
        line = self.known.get(text)
        if line is None:
            line = self.known[text] = parse_line(text)
        return line

    @cached_property
    def roles(self) -> list[str]:
        """The role of each line."""
        return [self.parsed(i).role for i in range(len(self.lines))]

    @cached_property
    def text_titles(self) -> list[int]:
        """For each line, the title of the plain-text section it is in, or -1.

        Release notes, NEWS files and READMEs shown as preformatted text have no heading
        elements: a section's title is a line underlined with a run of one character
        (``Release 3.11.0 (22 September 2015)`` over ``~~~~~~~~``), and every line after
        it among the same parent's children belongs to it, until the next such title.
        A line deeper down (a link in the text) belongs to its ancestor's section."""
        titles = [-1] * len(self.lines)
        last: dict[int, int] = {}
        for i, parent in enumerate(self.parent):
            title = last.get(parent)
            if title is None:
                title = titles[parent] if parent >= 0 else -1
            if (_UNDERLINE.match(self.lines[i]) and i > 0 and self.parent[i - 1] == parent
                    and _TEXT_LINE.match(self.lines[i - 1])):
                title = last[parent] = i - 1
                titles[i - 1] = i - 1
            titles[i] = title
        return titles

    def short_head(self, index: int, max_name: int = 40) -> str:
        """The line reduced to indentation, bid, role and a shortened name."""
        line = self.parsed(index)
        if not line.role:
            return self.lines[index]
        return "\t" * line.depth + line.head(max_name)


_UNDERLINE = re.compile(r"^\t*StaticText '([~=\-*^#])\1{2,}'$")
"""A text line that underlines the one above it (a plain-text section title)."""
_TEXT_LINE = re.compile(r"^\t*StaticText '\S")
