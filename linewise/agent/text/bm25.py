"""BM25 over lines: the words a line or a query is indexed by, and Okapi BM25 ranking.

Every line is a document: the words of its role, name, value and properties (URLs left
out: on a local site they match every query's host words). Shared text-retrieval tools:
the observation filters, the targets of the guards and the experience memory rank with
them. Pure Python; milliseconds on a 7,000-line page.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["STOPWORDS", "LineRanker", "line_words", "with_context", "words"]

_WORD = re.compile(r"[a-z0-9]+")
_URL = re.compile(r"url='[^']*'|url=\"[^\"]*\"")
_BID = re.compile(r"^\t*\[[A-Za-z0-9]+\] ")

_STOPWORD_TEXT = """
a an the and or of to in on for with by at from as is are was be been it its this that
these those there then than into out up down over under about which what who whom how
when where why do does did can could should would will shall may might must i you we
they he she my your our their me us them find open go click page please want need
some any all each every one more most other such only own same so too very just also
not no nor if but after before again once here while whose statictext generic none
true false clickable focused
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Words that say nothing about which line matters (and the roles every page is full of)."""


def _stem(word: str) -> str:
    """A crude suffix strip, enough for 'searching' to meet 'search' and 'lists' 'list';
    a final 'e' goes too, so that 'remove', 'removes' and 'removed' meet."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


def words(text: str) -> list[str]:
    """Content words of ``text``: lower-cased, split at punctuation (``json.dumps`` gives
    ``json`` and ``dumps``), stop words dropped, lightly stemmed."""
    return [_stem(w) for w in _WORD.findall(text.lower().replace("_", " "))
            if w not in STOPWORDS and len(w) > 1]


def line_words(line: str) -> list[str]:
    """The words a line is indexed by: no bid, no URL."""
    return words(_URL.sub("", _BID.sub("", line)))


@dataclass
class LineRanker:
    """Okapi BM25 over the lines of one page (each line a document)."""

    lines: Sequence[str]
    k1: float = 1.2
    b: float = 0.5
    word_counts: Sequence[Counter[str]] | None = None
    """Each line's ``Counter(line_words(line))`` when the caller already has them."""

    def __post_init__(self) -> None:
        self.docs = (list(self.word_counts) if self.word_counts is not None
                     else [Counter(line_words(line)) for line in self.lines])
        lengths = [sum(d.values()) for d in self.docs]
        self.lengths = lengths
        self.average = (sum(lengths) / len(lengths)) if lengths else 1.0
        frequency: Counter[str] = Counter()
        for doc in self.docs:
            frequency.update(doc.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in frequency.items()}

    def scores(self, query: str) -> list[float]:
        """One score per line (0 for lines sharing no query word)."""
        terms = [t for t in set(words(query)) if t in self.idf]
        out = [0.0] * len(self.docs)
        if not terms:
            return out
        average = self.average or 1.0
        for index, doc in enumerate(self.docs):
            if not doc:
                continue
            norm = self.k1 * (1 - self.b + self.b * self.lengths[index] / average)
            score = 0.0
            for term in terms:
                tf = doc.get(term)
                if tf:
                    score += self.idf[term] * tf * (self.k1 + 1) / (tf + norm)
            out[index] = score
        return out

    def top(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` best lines (0-based) with their scores, best first; zeros left out."""
        ranked = sorted(
            ((i, s) for i, s in enumerate(self.scores(query)) if s > 0),
            key=lambda pair: (-pair[1], pair[0]),
        )
        return ranked[:k]


def with_context(index: int, n_lines: int, context: int) -> range:
    """Line ``index`` and ``context`` lines either side (0-based, clipped)."""
    return range(max(0, index - context), min(n_lines, index + context + 1))
