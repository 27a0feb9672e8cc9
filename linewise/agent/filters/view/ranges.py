"""Reading the line ranges a retriever model answers with.

The paper's format is ``<answer>[(1,3), (20,25), (158,158)]</answer>``; small models
also write lists of lists, bare numbers, ``"4-9"`` strings, reversed bounds, numbers
past the end of the tree, or JSON objects when a schema constrains them. All of it is
read; bounds are ordered and clipped to the tree; overlapping and adjacent ranges are
merged. What cannot be read raises ``RangeParseError`` with a message meant for the
model, so it can be asked again.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from typing import Any, TypeGuard

from linewise.errors import RangeParseError

Range = tuple[int, int]

_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL | re.IGNORECASE)
_THINK_END = re.compile(r"</think>", re.IGNORECASE)
_PAIR = re.compile(
    r"[\[(]\s*(\d+)\s*[,;]\s*(\d+)\s*[\])]"  # (1, 3) or [1, 3]
    r"|(\d+)\s*(?:-|–|—|\.\.|to)\s*(\d+)"  # 1-3, 1..3, 1 to 3
    r"|(\d+)"  # 7
)
_MAX_NUMBER = 10_000_000


def extract_answer(text: str) -> str:
    """The part of the answer that holds the ranges (never the thinking)."""
    blocks: list[str] = _ANSWER.findall(text)
    if blocks:
        return blocks[-1].strip()
    parts = _THINK_END.split(text)
    if len(parts) > 1:
        return parts[-1].strip()
    if "<think>" in text.lower():
        raise RangeParseError("The answer has no <answer>…</answer> block after the thinking.")
    return text.strip()


def parse_ranges(text: str, n_lines: int) -> list[Range]:
    """Line ranges (1-based, inclusive, merged, sorted) from a retriever's answer."""
    if n_lines < 1:
        return []
    raw = raw_ranges(text)
    clipped = [
        (max(1, lo), min(n_lines, hi))
        for lo, hi in (sorted(pair) for pair in raw)
        if hi >= 1 and lo <= n_lines
    ]
    if not clipped:
        raise RangeParseError(
            f"Every range in the answer is outside the observation, which has lines 1 to "
            f"{n_lines}."
        )
    return merge_ranges(clipped)


def is_empty_answer(text: str) -> bool:
    """True for an answer that is explicitly an empty list (``[]``, ``{"ranges": []}``)."""
    try:
        return _structured(extract_answer(text)) == []
    except RangeParseError:
        return False


def raw_ranges(text: str) -> list[Range]:
    """The pairs exactly as the answer wrote them: unordered, unclipped, unmerged."""
    body = extract_answer(text)
    raw = _structured(body)
    if raw is None:
        raw = _scanned(body)
    if not raw:
        raise RangeParseError(
            "The answer holds no line numbers. Answer with a list of line ranges such as "
            "[(1,3), (20,25)]."
        )
    return raw


def merge_ranges(ranges: Iterable[Range]) -> list[Range]:
    """Sort and merge overlapping or adjacent ranges: (1,3),(4,6),(5,9) -> (1,9)."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def lines_of(ranges: Iterable[Range]) -> list[int]:
    """Every line number the ranges cover, in order."""
    return [n for lo, hi in ranges for n in range(lo, hi + 1)]


def ranges_of(line_numbers: Iterable[int]) -> list[Range]:
    """The smallest list of ranges covering exactly these line numbers."""
    return merge_ranges((n, n) for n in line_numbers)


def _structured(body: str) -> list[Range] | None:
    """Ranges from a JSON or Python literal, or None if the body is not one."""
    candidate = body.strip().strip("`").strip()
    if candidate.lower().startswith("json"):
        candidate = candidate[4:].strip()
    value: Any
    try:
        value = json.loads(candidate)
    except ValueError:
        try:
            value = ast.literal_eval(candidate)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    if isinstance(value, dict):
        for key in ("ranges", "lines", "line_ranges", "answer"):
            if key in value:
                value = value[key]
                break
        else:
            return None
    if isinstance(value, tuple) and len(value) == 2 and all(_is_int(v) for v in value):
        return [(int(value[0]), int(value[1]))]  # a lone (a, b) is a range
    if _is_int(value):
        return [(int(value), int(value))]
    if not isinstance(value, list | tuple):
        return None
    found: list[Range] = []
    for item in value:
        pair = _item_range(item)
        if pair is None:
            return None  # something unexpected inside: let the scanner try
        found.append(pair)
    return found


def _item_range(item: Any) -> Range | None:
    if _is_int(item):
        return (int(item), int(item))
    if isinstance(item, str):
        scanned = _scanned(item)
        return scanned[0] if len(scanned) == 1 else None
    if isinstance(item, dict):
        start = item.get("start", item.get("from"))
        end = item.get("end", item.get("to", start))
        if _is_int(start) and _is_int(end):
            return (int(start), int(end))
        return None
    if isinstance(item, list | tuple) and 1 <= len(item) <= 2 and all(_is_int(v) for v in item):
        return (int(item[0]), int(item[-1]))
    return None


def _is_int(value: Any) -> TypeGuard[int | float]:
    """A whole number in range (``3`` or ``3.0``, never ``True``)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return isinstance(value, int) and 0 <= value <= _MAX_NUMBER


def _scanned(body: str) -> list[Range]:
    """Ranges found by scanning free text for pairs and single numbers."""
    found: list[Range] = []
    for match in _PAIR.finditer(body):
        a, b, c, d, single = match.groups()
        if a is not None:
            pair = (int(a), int(b))
        elif c is not None:
            pair = (int(c), int(d))
        else:
            pair = (int(single), int(single))
        if max(pair) <= _MAX_NUMBER:
            found.append(pair)
    return found
