"""Where the learned retriever's training data may come from, and what it is made of.

Rules, and why:

- A page belongs to a *family*: the documentation package it was served from (the first
  path segment of a URL under a server of ``/usr/share/doc``, or the package folder of a
  ``file:`` URL), else the site's host. Held-out figures mean something only when no page
  of their family was trained on, so families are checked here, once, for every source.
- Debian's ``sqlite3-doc``, ``git-doc`` and ``postgresql-doc-*`` are reserved for
  independent evaluation: a source from them is refused, always.
- The families linewise's own held-out filter cases and the docs-agent benchmark are
  built on (:data:`EVALUATION_FAMILIES`) are refused by default too, so the figures
  reported against them stay held out; ``allow_evaluation=True`` lifts that for a user
  who trains on their own site and measures elsewhere.
- A page snapshot is the page's AXTree lines as an observation gives them (unnumbered),
  so training sees exactly the text the filter sees at run time.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, Field

from linewise.errors import ConfigError

__all__ = [
    "EVALUATION_FAMILIES",
    "RESERVED_FAMILIES",
    "PageSnapshot",
    "check_family",
    "page_family",
    "read_snapshots",
]

RESERVED_FAMILIES = ("sqlite3-doc", "git-doc", "postgresql-doc*")
"""Kept for independent evaluation: never a training source."""

EVALUATION_FAMILIES = frozenset({
    # tasks/filter-cases (large.*, heldout*, docs.*) and tasks/docs-agent.yaml
    "python3-doc", "valgrind", "python-django-doc", "zsh-doc", "apache2-doc",
    "ffmpeg-doc", "nodejs-doc",
    # tasks/docs-episodes.yaml and the shipped synthetic pages
    "filter-cases",
})
"""Families linewise's own held-out figures are measured on."""

_DOC_ROOT = "/usr/share/doc/"
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.\-]+$")


def page_family(url: str) -> str:
    """The family of a page: its documentation package, else its host."""
    parts = urlsplit(url)
    path = unquote(parts.path)
    if parts.scheme == "file":
        if path.startswith(_DOC_ROOT):
            return path[len(_DOC_ROOT):].split("/", 1)[0]
        if "/filter-cases/" in path:
            return "filter-cases"
        return Path(path).parent.name or "file"
    host = (parts.hostname or "").lower()
    segments = path.strip("/").split("/")
    if host in ("127.0.0.1", "localhost", "::1") and len(segments) > 1 \
            and _PACKAGE.match(segments[0]):
        return segments[0]  # a folder of a local server: the package it serves
    return host or "unknown"


def check_family(family: str, source: str, *, allow_evaluation: bool = False) -> None:
    """Refuse a training source of a reserved (or, by default, an evaluation) family.

    Raises:
        ConfigError: naming the source and the rule.
    """
    for pattern in RESERVED_FAMILIES:
        if fnmatch.fnmatchcase(family, pattern):
            raise ConfigError(
                f"{source}: pages of {family} are reserved for independent evaluation "
                "and are never training data"
            )
    if family in EVALUATION_FAMILIES and not allow_evaluation:
        raise ConfigError(
            f"{source}: {family} is a family linewise's held-out figures are measured on; "
            "training on it would make them meaningless (allow it with "
            "--allow-evaluation-families when you measure on other pages)"
        )


class PageSnapshot(BaseModel):
    """One page as an observation read it."""

    url: str
    family: str
    title: str = ""
    lines: list[str] = Field(description="The AXTree lines, unnumbered.")


def read_snapshots(path: Path) -> list[PageSnapshot]:
    """The snapshots in a JSONL file (one page per line).

    Raises:
        ConfigError: the file cannot be read or a line is not a snapshot.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    snapshots = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            snapshots.append(PageSnapshot.model_validate_json(line))
        except ValueError as exc:
            raise ConfigError(f"{path}:{number}: not a page snapshot ({exc})") from None
    return snapshots
