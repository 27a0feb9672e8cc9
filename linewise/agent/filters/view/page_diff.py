"""What changed between two steps' AXTree lines, and where the unchanged lines went.

An incremental step changes a few lines of a page: the common head and tail are cut
first (comparing strings, fast), and only the middle is diffed line by line with
:mod:`difflib`, whose cost grows with the lines it is given (seconds for a whole
20,000-line page). Popular lines (``StaticText ','`` and the like) are not used to
start a match (difflib's ``autojunk``), which keeps two distant changes on a large
page cheap; a run of them between changes may then count as changed, never the other
way round.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from linewise.axtree import without_state

__all__ = ["PageDiff", "diff_pages"]


@dataclass(frozen=True)
class PageDiff:
    """The change from an old list of lines to a new one (0-based indices)."""

    blocks: list[tuple[int, int, int]] = field(default_factory=list)
    """Runs of equal lines: (old start, new start, length), ascending."""
    changed: list[range] = field(default_factory=list)
    """Runs of new lines inserted or replaced, ascending."""
    removed: int = 0
    """Old lines deleted or replaced."""

    @property
    def changed_lines(self) -> list[int]:
        return [i for run in self.changed for i in run]

    def new_index(self, old: int) -> int | None:
        """Where old line ``old`` is now, or None if it changed or went."""
        at = bisect.bisect_right(self.blocks, old, key=lambda block: block[0]) - 1
        if at < 0:
            return None
        start, new_start, size = self.blocks[at]
        return new_start + old - start if old < start + size else None

    def carried(self, old_lines: Iterable[int]) -> set[int]:
        """The new indices of those old lines that are still there, unchanged."""
        return {n for i in old_lines if (n := self.new_index(i)) is not None}


def diff_pages(previous: Sequence[str], lines: Sequence[str]) -> PageDiff:
    """The diff from ``previous`` to ``lines``. Lines are compared without their state
    (``axtree.without_state``): focus moving, or the URL's fragment, changes no content."""
    previous = [without_state(line) for line in previous]
    lines = [without_state(line) for line in lines]
    limit = min(len(previous), len(lines))
    head = 0
    while head < limit and previous[head] == lines[head]:
        head += 1
    tail = 0
    while tail < limit - head and previous[-1 - tail] == lines[-1 - tail]:
        tail += 1
    blocks: list[tuple[int, int, int]] = [(0, 0, head)] if head else []
    changed: list[range] = []
    removed = 0
    old_end, new_end = len(previous) - tail, len(lines) - tail
    if head < old_end or head < new_end:
        matcher = difflib.SequenceMatcher(
            None, list(previous[head:old_end]), list(lines[head:new_end]), autojunk=True
        )
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                blocks.append((head + i1, head + j1, i2 - i1))
                continue
            removed += i2 - i1
            if j2 > j1:
                changed.append(range(head + j1, head + j2))
    if tail:
        blocks.append((old_end, new_end, tail))
    return PageDiff(blocks=blocks, changed=changed, removed=removed)
