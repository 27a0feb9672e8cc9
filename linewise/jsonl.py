"""JSON Lines, read the one way: lines end at ``\\n`` and nowhere else.

linewise writes JSONL (steps, results, memories, pruner verdicts) with
pydantic's and the standard library's encoders, which leave non-ASCII characters as
they are. Text from pages and models holds characters that ``str.splitlines`` takes for
line ends — U+2028 and U+2029, U+0085, U+001C to U+001E, form feed, vertical tab —
inside a JSON string they are ordinary characters, and splitting there cut one record
into two halves that are not JSON: a thought holding U+2028 made a whole memory file
unreadable. Every JSONL reader splits with ``split_lines`` or ``read_jsonl``.

A line that cannot be read (not UTF-8, not JSON, nested deeper than the parser's
recursion limit) is returned with the reason, never raised: each reader decides whether
a damaged line is skipped with a warning or refused with the file and line named.

``append_line`` writes a line whole or not at all: on a full or read-only disk a line
cut in the middle is the file's end until the next run cuts it, and a reader that
follows the file (the viewer's ``--serve``) would take the next line's start for its
rest.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["JsonlLine", "append_line", "read_jsonl", "split_lines"]


def split_lines(text: str) -> list[str]:
    """``text`` cut at ``\\n`` only (a ``\\r`` before it stays, and is JSON whitespace)."""
    return text.split("\n")


@dataclass(frozen=True)
class JsonlLine:
    """One non-blank line: its value, or why it has none."""

    number: int
    """1-based, counting every line of the file."""
    value: Any = None
    error: str | None = None
    """``not UTF-8 (byte N)``, ``not JSON (…)`` or ``JSON nested too deeply``."""
    complete: bool = True
    """False for a last line without its ``\\n``: one still being written, or torn."""


def read_jsonl(data: bytes) -> Iterator[JsonlLine]:
    """The non-blank lines of ``data``, each parsed, in order."""
    lines = data.split(b"\n")
    last = len(lines)
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        complete = number < last
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield JsonlLine(number, error=f"not UTF-8 (byte {exc.start})", complete=complete)
            continue
        try:
            yield JsonlLine(number, value=json.loads(text), complete=complete)
        except RecursionError:
            yield JsonlLine(number, error="JSON nested too deeply", complete=complete)
        except json.JSONDecodeError as exc:
            yield JsonlLine(number, error=f"not JSON ({exc.msg} at column {exc.colno})",
                            complete=complete)


def append_line(path: os.PathLike[str] | str, line: str) -> None:
    """Append ``line`` (which ends with ``\\n``) to ``path`` whole, flushed to disk.

    The line is built before anything is written and goes out in one ``write``. If the
    disk takes only part of it, or refuses it or the ``fsync``, the file is cut back to
    its length before, and the ``OSError`` is raised (a short write's own reason is
    learnt by writing the rest once: ENOSPC, EFBIG, EDQUOT).

    Raises:
        OSError: the line could not be written (the file is as it was, if it could be
            cut back).
    """
    data = line.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        before = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written < len(data):
                written += os.write(fd, data[written:])
                if written < len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)
            raise
    finally:
        os.close(fd)
