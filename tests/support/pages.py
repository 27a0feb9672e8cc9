"""Reading the test pages' observations."""

from __future__ import annotations

import re


def bid_of(lines: list[str], pattern: str) -> str:
    """The bid on the first line matching ``pattern``."""
    for line in lines:
        if re.search(pattern, line):
            found = re.search(r"\[([a-zA-Z0-9]+)\]", line)
            assert found, f"line has no bid: {line!r}"
            return found.group(1)
    raise AssertionError(f"no line matches {pattern!r}:\n" + "\n".join(lines))
