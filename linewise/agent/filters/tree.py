"""The tree hidden in the flattened AXTree lines: depth, parent, subtree, bid of each line.

Indices here are 0-based positions in ``lines``; the numbers models see are 1-based
(line ``n`` is ``lines[n - 1]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_BID = re.compile(r"^\t*\[([A-Za-z0-9]+)\] ")
_HEAD = re.compile(
    r"^(?P<indent>\t*)(?:\[(?P<bid>[A-Za-z0-9]+)\] )?(?P<role>[^\s,]+)"
    r"(?: (?P<name>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?"
)


def bid_of(line: str) -> str | None:
    """The bid a line starts with (after its indentation), if any."""
    match = _BID.match(line)
    return match.group(1) if match else None


@dataclass
class LineTree:
    """Structure of indented AXTree lines (one tab per level, as BrowserGym writes them)."""

    lines: list[str]
    depth: list[int] = field(init=False)
    parent: list[int] = field(init=False)
    """Index of each line's parent, -1 for top-level lines."""
    subtree_end: list[int] = field(init=False)
    """One past the last line of each line's subtree."""
    bid_line: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.lines)
        self.depth = [len(line) - len(line.lstrip("\t")) for line in self.lines]
        self.parent = [-1] * n
        self.subtree_end = [n] * n
        self.bid_line = {}
        stack: list[int] = []
        for i, depth in enumerate(self.depth):
            while stack and self.depth[stack[-1]] >= depth:
                self.subtree_end[stack.pop()] = i
            self.parent[i] = stack[-1] if stack else -1
            stack.append(i)
            match = _BID.match(self.lines[i])
            if match:
                self.bid_line.setdefault(match.group(1), i)

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

    def short_head(self, index: int, max_name: int = 40) -> str:
        """The line reduced to indentation, bid, role and a shortened name."""
        line = self.lines[index]
        match = _HEAD.match(line)
        if match is None:
            return line
        text = match.group("indent")
        if match.group("bid"):
            text += f"[{match.group('bid')}] "
        text += match.group("role")
        name = match.group("name")
        if name and len(name) > 2:
            inner = name[1:-1]
            if len(inner) > max_name:
                inner = inner[: max_name - 1].rstrip() + "…"
            text += f" {name[0]}{inner}{name[-1]}"
        return text
