"""The flattened AXTree's line format: ``\t\t[12] button 'OK', clickable``.

Each line is one node, indented by its depth with tabs, with its bid in brackets when the
element is marked. Numbering (``12|…``) is how the retriever and the traces refer to lines.
"""

from __future__ import annotations

import re

_BID = re.compile(r"^\t*\[([A-Za-z0-9]+)\] ")


def line_bid(line: str) -> str | None:
    """The bid of a flattened AXTree line, or None for an unmarked node or a marker."""
    match = _BID.match(line)
    return match.group(1) if match else None


def number_lines(lines: list[str], start: int = 1) -> str:
    """Every line prefixed with its 1-based number: ``12|\\t[34] button 'OK'``."""
    return "\n".join(f"{i}|{line}" for i, line in enumerate(lines, start))
