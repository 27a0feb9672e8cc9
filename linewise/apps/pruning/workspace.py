"""The phase-2 workspace, and how a piece of information is recognised in it.

The workspace is the state graph as it grows: the information nodes seen so far, the
action nodes, and the edges between them. An extractor's piece of information is
either a repeat of a workspace entry, the agent's own intention restated, or new:

- **A repeat** is the same text (case, spacing, quotes and trailing punctuation aside),
  the same words once the small ones are left out (``"Select the Nb box and then click
  Submit"`` repeats ``"select Nb box, click Submit"``), or a workspace line copied with
  its id (``"I3: …"``, or just ``"I3"``). Identical wording is the same information by
  any reading; a small extractor that fails to say so gives every repeat a node of its
  own, produced by the step that re-saw it, and every repeated step then looks
  necessary. Negations are not small words: ``"X is not checked"`` never repeats
  ``"X is checked"``.
- **An intention** restates what the agent means to do, not what the page showed: an
  action node's goal (word for word, or nearly and worded as an instruction), a plan
  ("the agent needs to …", "… I need to click", "let me …", "the goal is to …"), or a
  report of its own action ("the agent clicked …": the action is in the graph already,
  and what it changed is on the next page). It comes from the goal, so it is I0: an action
  that relied on it relied on the goal, and no step is made necessary for having
  "produced" it. Thoughts are not intentions as a whole: they also say what the page
  shows, and a fact taken for the goal would lose the step that produced it.

A browser page persists across steps, unlike the paper's search results: a fact the
extractor first mentions at step k (when it starts to matter) may have been on the
page since the start. ``PageHistory`` traces a new piece back to the first page of the
unbroken run of pages that show the lines supporting it, so its producer is the action
that made it appear, not merely the one before it was mentioned. The supporting lines
are the fewest (up to three) holding most of the piece's words that are on the page at
all (pieces are worded freely: "The page has a radio button QWS1FL but it is not
checked" is the line "[25] radio 'QWS1FL', checked='false'"). Lines compare whole, so
a changed value is a new fact; only a moved focus is not, unless the piece speaks of
focus. A piece no line supports stays where it was reported.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from linewise.apps.pruning.graph import GraphNode

_QUOTES = re.compile("[\"'`\u2018\u2019\u201c\u201d]")
_ID_PREFIX = re.compile(r"^\s*(I\d+)\s*(?::|$)")
_WORD = re.compile(r"[^\W_]+")
_INTENTION = re.compile(
    r"^\s*(?:(?:now|next|then|first|so),?\s+)?(?:let\s+me\b|(?:the\s+(?:agent|user|"
    r"assistant)|i|we|you)(?:\s+|'|\u2019)(?:need|needs|should|must|will|ll|want|wants|"
    r"has\s+to|have\s+to|am\s+going\s+to|is\s+going\s+to|are\s+going\s+to)\b|"
    r"(?:the\s+)?(?:agent(?:'|\u2019)?s\s+)?(?:goal|task)\s+is\s+to\b|"
    r"the\s+agent\s+(?:has\s+|had\s+)?(?:clicked|selected|chose|chosen|checked|typed|"
    r"filled|entered|pressed|focused|scrolled|hovered|navigated|went|gone|opened|"
    r"submitted|tried|attempted)\b)",
    re.IGNORECASE,
)
_FIRST_PERSON_PLAN = re.compile(
    r"\b(?:I|we)\s+(?:need|have|want|must|should|ought)\s+to\b|\b(?:I|we)\s+(?:will|shall)\b|"
    r"\b(?:I|we)(?:'|\u2019)ll\b", re.IGNORECASE)
IMPERATIVES = frozenset({
    "click", "select", "choose", "check", "uncheck", "tick", "fill", "type", "enter",
    "press", "submit", "scroll", "go", "navigate", "open", "find", "search", "focus",
    "hover", "drag", "clear", "upload", "send", "report", "answer", "read", "wait",
})
"""First words that make a piece an instruction rather than a fact about the page."""
SMALL_WORDS = frozenset({
    "a", "an", "the", "and", "then", "to", "of", "on", "in", "into", "at", "by", "for",
    "with", "as", "is", "are", "be", "been", "was", "were", "this", "that", "these",
    "those", "it", "its", "there", "here", "so", "also", "now",
})
"""Words left out when comparing wordings. Negations, numbers and words that change a
relation (``or``, ``from``, ``not``) are never among them."""
INTENTION_OVERLAP = 0.8
"""Share of content words (Jaccard) at which an instruction restates an action goal."""


def normal(text: str) -> str:
    """A piece's text for word-for-word comparison (case, spacing, quotes aside)."""
    text = _QUOTES.sub("", text.casefold())
    return " ".join(text.split()).strip(" .;:")


def content_words(text: str) -> tuple[str, ...]:
    """The words of ``text`` that carry its meaning, in order, without the small ones."""
    return tuple(w for w in _WORD.findall(text.casefold()) if w not in SMALL_WORDS)


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


@dataclass
class Intentions:
    """What the agent meant to do: the goals of its action nodes."""

    keys: set[tuple[str, ...]] = field(default_factory=set)
    goals: list[frozenset[str]] = field(default_factory=list)

    def add_goal(self, goal: str) -> None:
        words = content_words(goal)
        if words:
            self.keys.add(words)
            self.goals.append(frozenset(words))

    def restated_by(self, text: str) -> bool:
        """Whether ``text`` restates an intention rather than report the page."""
        if _INTENTION.match(text) or _FIRST_PERSON_PLAN.search(text):
            return True
        words = content_words(text)
        if not words:
            return False
        if words in self.keys:
            return True
        pieces = frozenset(words)
        return (words[0] in IMPERATIVES and len(pieces) >= 3
                and any(_overlap(pieces, goal) >= INTENTION_OVERLAP for goal in self.goals))


SUPPORT = 0.6
"""Share of a piece's words found on the page that its supporting lines must hold."""
ON_PAGE = 1 / 3
"""Share of a piece's content words that must be on the page for any line to support it."""
MAX_SUPPORT_LINES = 3
"""A piece is atomic: at most this many lines may support it."""
_FOCUSED = re.compile(r",\s*focused\b")


class PageHistory:
    """The lines of each page of a trajectory, to find where a fact first appeared."""

    def __init__(self, pages: Sequence[str]) -> None:
        self._lines = [[" ".join(line.split()) for line in page.splitlines() if line.strip()]
                       for page in pages]
        self._words = [[frozenset(content_words(line)) for line in lines]
                       for lines in self._lines]
        self._vocabulary = [frozenset().union(*words) for words in self._words]
        self._line_sets = [set(lines) for lines in self._lines]
        self._unfocused = [{_FOCUSED.sub("", line) for line in lines} for lines in self._lines]

    def supporting_lines(self, text: str, position: int) -> list[str]:
        """The fewest lines of page ``position`` (at most ``MAX_SUPPORT_LINES``) that hold
        most of the piece's words found on the page, or none if they hold too few."""
        words = frozenset(content_words(text))
        if not words or not 0 <= position < len(self._lines):
            return []
        on_page = words & self._vocabulary[position]
        if len(on_page) < 2 or len(on_page) < ON_PAGE * len(words):
            return []
        chosen: list[str] = []
        covered: frozenset[str] = frozenset()
        lines = list(zip(self._lines[position], self._words[position], strict=True))
        while len(chosen) < MAX_SUPPORT_LINES:
            gain, line, line_words = max(
                ((len((on_page & w) - covered), text_, w) for text_, w in lines),
                key=lambda item: item[0], default=(0, "", frozenset()))
            if gain == 0:
                break
            chosen.append(line)
            covered |= on_page & line_words
        needed = max(2, math.ceil(SUPPORT * len(on_page)))
        return chosen if len(covered) >= needed else []

    def first_shown(self, text: str, position: int) -> int:
        """The earliest position from which every page up to ``position`` shows the
        lines supporting ``text`` (``position`` itself when nothing supports it). Focus
        moves are not changes of the fact unless the piece speaks of focus."""
        lines = self.supporting_lines(text, position)
        if not lines:
            return position
        about_focus = not {"focus", "focused"}.isdisjoint(content_words(text))
        if not about_focus:
            lines = [_FOCUSED.sub("", line) for line in lines]
        earlier = self._line_sets if about_focus else self._unfocused
        while position > 0 and all(line in earlier[position - 1] for line in lines):
            position -= 1
        return position


@dataclass
class Workspace:
    """The graph as it grows: nodes, edges (deduplicated, in order) and info texts."""

    source: str = "I0"
    nodes: list[GraphNode] = field(default_factory=list)
    edges: dict[tuple[str, str], None] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)
    first_seen: dict[int, list[GraphNode]] = field(default_factory=dict)
    """Information nodes by the trajectory position of the page they were first seen on."""
    _by_text: dict[str, str] = field(default_factory=dict)
    _by_words: dict[tuple[str, ...], str] = field(default_factory=dict)

    def add_info(self, text: str, position: int | None = None, step: int | None = None) -> str:
        node_id = f"I{len(self.info)}"
        self.info[node_id] = text
        extra: dict[str, Any] = {"text": text}
        if step is not None:
            extra["step"] = step
        node = GraphNode(id=node_id, kind="info", **extra)
        self.nodes.append(node)
        self._by_text.setdefault(normal(text), node_id)
        words = content_words(text)
        if words:
            self._by_words.setdefault(words, node_id)
        if position is not None:
            self.first_seen.setdefault(position, []).append(node)
        return node_id

    def match(self, text: str) -> str | None:
        """The entry ``text`` repeats (see the module's docstring), or None."""
        copied = _ID_PREFIX.match(text)
        if copied and copied.group(1) in self.info:
            return copied.group(1)
        key = normal(text)
        if not key:
            return None
        return self._by_text.get(key) or self._by_words.get(content_words(text))

    def link(self, start: str, end: str) -> None:
        """Add the edge ``start -> end``; nothing produces the source, so no edge ends
        there (a page restating the goal does not make the goal a result)."""
        if start != end and end != self.source:
            self.edges[(start, end)] = None

    def render(self, limit: int = 200) -> str:
        return "\n".join(f"{node_id}: {clip(text, limit)}" for node_id, text in self.info.items())


def clip(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
