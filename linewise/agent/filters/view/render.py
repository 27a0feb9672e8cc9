"""Render a filtered AXTree: the kept lines in page order, each gap as one marker line.

Every filter that keeps a subset of lines shows it the same way, so the action model
always sees the same kind of view::

    [1] RootWebArea 'Docs'
        … 12 lines omitted …
        [40] link 'Pricing'
    … 3 lines omitted …

(with tabs for indentation in real AXTrees). A run of dropped lines becomes ONE marker
line, indented like the first dropped line, so the tree keeps its shape.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from linewise.axtree import line_depth

__all__ = ["MARKER_RE", "line_ranges", "omission_marker", "render_with_markers"]

#: Matches a marker line made by :func:`omission_marker`; group ``n`` is the count.
MARKER_RE = re.compile(r"^(?P<indent>\s*)… (?P<n>\d+) lines? omitted …$")


def omission_marker(n_lines: int, indent: str = "") -> str:
    """The marker line that stands for ``n_lines`` dropped lines: ``… 7 lines omitted …``."""
    if n_lines < 1:
        raise ValueError(f"a marker stands for at least one line, not {n_lines}")
    noun = "line" if n_lines == 1 else "lines"
    return f"{indent}… {n_lines} {noun} omitted …"


def _indent_of(line: str) -> str:
    return "\t" * line_depth(line)


def render_with_markers(
    lines: Sequence[str],
    kept_line_numbers: Iterable[int],
    show: Callable[[int, str], str] | None = None,
) -> str:
    """The kept lines in order, each run of dropped lines replaced by one marker line.

    Args:
        lines: The full observation; line n (1-based) is ``lines[n - 1]``.
        kept_line_numbers: 1-based numbers of the lines to show, in any order, repeats
            allowed.
        show: How a kept line is written, from its 0-based index and text (a retriever
            prompt numbers its lines, or shortens some); by default as it is.

    Returns:
        The view, lines joined with ``\\n``; ``""`` when ``lines`` is empty.

    Raises:
        ValueError: a kept number is outside ``1..len(lines)``.
    """
    kept = set(kept_line_numbers)
    bad = sorted(n for n in kept if not 1 <= n <= len(lines))
    if bad:
        raise ValueError(
            f"kept line numbers {bad[:5]} are outside 1..{len(lines)} ({len(bad)} out of range)"
        )
    out: list[str] = []
    gap_start: int | None = None  # 0-based index of the first line of the current gap
    for index, line in enumerate(lines):
        if index + 1 in kept:
            if gap_start is not None:
                out.append(omission_marker(index - gap_start, _indent_of(lines[gap_start])))
                gap_start = None
            out.append(show(index, line) if show is not None else line)
        elif gap_start is None:
            gap_start = index
    if gap_start is not None:
        out.append(omission_marker(len(lines) - gap_start, _indent_of(lines[gap_start])))
    return "\n".join(out)


def line_ranges(line_numbers: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted inclusive ranges covering exactly these numbers: ``[1, 2, 3, 7]`` →
    ``[(1, 3), (7, 7)]``."""
    ranges: list[tuple[int, int]] = []
    for n in sorted(set(line_numbers)):
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], n)
        else:
            ranges.append((n, n))
    return ranges
