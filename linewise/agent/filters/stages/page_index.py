"""One page's structures for the focus filters, built once and carried to the next page.

A focus step reads the whole page several ways: its tree, each line's role, the
outline, a BM25 index of its words. On a 20,000-line page each costs a tenth of a
second to seconds on a busy small machine, and the next step's page is often the same
page with a few lines changed. :class:`PageIndex` builds each structure on first use,
once per page; the index of the next page takes over, by line text, what was read line
by line (parsed lines, word counts), so only changed lines are read again. Nothing of
an older page is kept: each index keeps the texts of its own page only.
"""

from __future__ import annotations

from collections import Counter
from functools import cached_property

from linewise.agent.filters.stages.context_embedding import Unit, page_units
from linewise.agent.filters.stages.passages import passage_ranker
from linewise.agent.filters.stages.term_match import entry_names
from linewise.agent.filters.view.outline import OutlineEntry, outline_of
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.bm25 import LineRanker, line_words

__all__ = ["PageIndex"]


class PageIndex:
    """The structures of one page (``lines``), each built on first use."""

    tree: LineTree
    _word_counts: dict[str, Counter[str]]

    def __init__(self, lines: list[str], previous: PageIndex | None = None) -> None:
        self.lines = lines
        known = previous.tree.known if previous is not None else {}
        counts = previous._word_counts if previous is not None else {}
        self.tree = LineTree(lines, known={
            t: p for t in lines if (p := known.get(t)) is not None})
        self._word_counts = {
            t: c for t in lines if (c := counts.get(t)) is not None}

    def following(self, lines: list[str]) -> PageIndex:
        """The index of the next step's page: this one if the page is the same."""
        return self if lines == self.lines else PageIndex(lines, self)

    @cached_property
    def outline(self) -> list[OutlineEntry]:
        """Every outline entry of the page, in page order."""
        return outline_of(self.tree.parsed(i) for i in range(len(self.lines)))

    @cached_property
    def ranker(self) -> LineRanker:
        """BM25 over the page's lines."""
        return LineRanker(self.lines, word_counts=[self._counts(t) for t in self.lines])

    @cached_property
    def units(self) -> list[Unit]:
        """The page's blocks with their context (:func:`.context_embedding.page_units`)."""
        return page_units(self.tree)

    @cached_property
    def passage_ranker(self) -> LineRanker:
        """BM25 over the page's blocks (:mod:`.passages`)."""
        return passage_ranker(self.units)

    @cached_property
    def entries(self) -> list[tuple[int, str]]:
        """The page's terms and headings with their names (:func:`.term_match.entry_names`)."""
        return entry_names(self.tree)

    def _counts(self, text: str) -> Counter[str]:
        found = self._word_counts.get(text)
        if found is None:
            found = self._word_counts[text] = Counter(line_words(text))
        return found
