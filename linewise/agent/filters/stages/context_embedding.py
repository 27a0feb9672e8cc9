"""Embedding candidates that carry their structure: units scored with their context.

A paraphrased goal ("which function tells me whether an entry is a folder?") shares
no word with the element the action needs (``term 'os.path.isdir(path)'``), but the
element's *description* says the same thing in other words. So the units embedded here
are the page's blocks — a term with the start of its definition, a row with its cells,
an article or list item with its names, a paragraph, a named control — each prefixed
with its context: the term it describes, the nearest heading before it, the row it is
in. A matching unit proposes its own line *and* its anchor (the term, heading or row),
so the element comes with the text that matched it (:func:`unit_groups`).

The units of a page are built once per page (cached by the page's lines) and embedded
once; later steps on the same page embed only the query.

With a reranker (a cross-encoder, ``linewise retriever train --kind reranker``), the
embedder's :data:`RERANK_CANDIDATES` best units are put in the reranker's order before
the top ``k`` are taken. It reads the query and a unit together, so it costs a pass per
unit: its scores are kept by (query, unit), and a step whose query and page did not
change pays nothing. A reranker that cannot run (a damaged folder) is dropped for the
episode with a warning: the stage goes on in the embedder's order, which is what it
was before the reranker was added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import structlog

from linewise.agent.filters.base import FilterInput, query_text
from linewise.agent.filters.stages.groups import Group
from linewise.agent.filters.view.items import ITEM_ROLES, line_roles
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.embedders import Embedder, normalised
from linewise.agent.text.learned import TrainedReranker
from linewise.errors import ModelError

log = structlog.get_logger(__name__)

__all__ = ["RERANK_CANDIDATES", "Unit", "UnitIndex", "page_units", "unit_groups"]

# Blocks that become units (items are units too): what a description or a control is.
_BLOCK_ROLES = frozenset({
    "term", "paragraph", "heading", "button", "textbox", "searchbox", "combobox",
    "checkbox", "radio", "listbox", "switch", "slider", "spinbutton", "tab", "menuitem",
    "columnheader", "cell", "gridcell", "option", "caption", "figcaption", "blockquote",
})
_CONTROL_ROLES = frozenset({
    "button", "textbox", "searchbox", "combobox", "checkbox", "radio", "listbox", "switch",
    "slider", "spinbutton", "tab", "menuitem", "option",
})
"""Blocks an action uses: each is a unit of its own even inside an item's unit (a field
of a form, a button of a row), since the item's text proposes only the item's line and
the lines around it, never a control further down its subtree."""
_ANCHOR_ROLES = frozenset({"term", "row", "article", "listitem", "heading"})
RERANK_CANDIDATES = 30
"""Units a reranker reorders: the embedder's best; the stage proposes at most
``top_k`` (10) of them, so the reranker chooses among three times as many."""
_UNIT_WORDS = 48
"""Words of a unit's own text embedded (MiniLM's cost grows with the length)."""


@dataclass(frozen=True)
class Unit:
    index: int
    """0-based line of the block."""
    anchor: int
    """0-based line of its context (term, heading, row…), or the block itself."""
    text: str


def _names(tree: LineTree, start: int, stop: int, limit: int) -> list[str]:
    words: list[str] = []
    for i in range(start, stop):
        name = tree.parsed(i).name
        if name:
            words.extend(name.split())
            if len(words) >= limit:
                break
    return words[:limit]


def page_units(tree: LineTree, roles: Sequence[str] | None = None) -> list[Unit]:
    """The blocks of a page with their context text, in page order."""
    role = roles if roles is not None else line_roles(tree)
    units: list[Unit] = []
    last_heading = -1
    covered_until = 0  # a block inside a unit already taken (a cell in a row) is skipped
    for index in range(len(tree)):
        if role[index] == "heading":
            last_heading = index
        is_item = role[index] in ITEM_ROLES and role[index] != "group"
        if not (is_item or role[index] in _BLOCK_ROLES):
            continue
        if (index < covered_until and role[index] not in ("term", "heading")
                and role[index] not in _CONTROL_ROLES):
            continue
        anchor = index
        context: list[str] = []
        for ancestor in tree.ancestors(index):
            if role[ancestor] in _ANCHOR_ROLES:
                anchor = ancestor
                break
            if role[ancestor] == "definition":
                term = _term_before(tree, role, ancestor)
                if term is not None:
                    anchor = term
                break
        if anchor == index and role[index] not in ("term", "heading") and last_heading >= 0:
            anchor = last_heading
        if anchor != index:
            context = _names(tree, anchor, anchor + 1, 16)
        stop = tree.subtree_end[index]
        if role[index] == "term":
            # a term's own subtree repeats its name; its definition says what it does
            definition = stop if stop < len(tree) and role[stop] == "definition" else -1
            if definition >= 0:
                stop = tree.subtree_end[definition]
        own = _names(tree, index, stop, _UNIT_WORDS)
        if not own:
            continue
        if is_item or role[index] == "term":
            covered_until = max(covered_until, stop)
        units.append(Unit(index, anchor, " ".join([*context, "—", *own] if context else own)))
    return units


def _term_before(tree: LineTree, role: Sequence[str], definition: int) -> int | None:
    """The term a definition line describes: its nearest preceding term sibling."""
    parent = tree.parent[definition]
    previous = definition - 1
    while previous > parent:
        if tree.parent[previous] == parent:
            if role[previous] == "term":
                return previous
            if role[previous] != "definition":
                return None
        previous -= 1
    return None


class UnitIndex:
    """The units of the last page seen and their vectors: reused while the page is the
    same (an unchanged page costs one query embedding), and kept by text, so a page
    that changed embeds only its new units."""

    def __init__(self, embedder: Embedder, max_cached: int = 50_000, *,
                 reranker: TrainedReranker | None = None,
                 candidates: int = RERANK_CANDIDATES) -> None:
        self.embedder = embedder
        self.reranker = reranker
        self.candidates = candidates
        self.max_cached = max_cached
        self._reranked: dict[tuple[str, str], float] = {}
        self._lines: list[str] | None = None
        self._units: list[Unit] = []
        self._vectors: np.ndarray | None = None
        self._by_text: dict[str, np.ndarray] = {}

    async def units(self, tree: LineTree) -> tuple[list[Unit], np.ndarray | None]:
        if self._lines != tree.lines:
            self._units = page_units(tree)
            texts = [u.text for u in self._units]
            missing = list(dict.fromkeys(t for t in texts if t not in self._by_text))
            if missing:
                vectors = normalised(await self.embedder.embed(missing), len(missing),
                                     "embedder")
                if len(self._by_text) + len(missing) > self.max_cached:
                    needed = set(texts)  # forget what this page no longer holds
                    self._by_text = {t: v for t, v in self._by_text.items() if t in needed}
                self._by_text.update(zip(missing, vectors, strict=True))
            self._vectors = np.stack([self._by_text[t] for t in texts]) if texts else None
            self._lines = list(tree.lines)
        return self._units, self._vectors

    async def rerank(self, query: str, units: Sequence[Unit], order: np.ndarray
                     ) -> np.ndarray:
        """``order`` (unit indices, best first) with its first ``candidates`` in the
        reranker's order (ties keep the embedder's)."""
        if self.reranker is None:
            return order
        best = order[: self.candidates]
        texts = [units[int(i)].text for i in best]
        missing = list(dict.fromkeys(t for t in texts if (query, t) not in self._reranked))
        if missing:
            if len(self._reranked) + len(missing) > self.max_cached:
                self._reranked = {}
            try:
                scores = await self.reranker.score(query, missing)
            except ModelError as exc:
                log.warning("reranker unavailable; the units stage keeps the embedder's "
                            "order", error=str(exc))
                self.reranker = None
                return order
            self._reranked.update(((query, t), float(s))
                                  for t, s in zip(missing, scores, strict=True))
        again = np.array([self._reranked[(query, t)] for t in texts], dtype=np.float32)
        return np.concatenate([best[np.argsort(-again, kind="stable")],
                               order[self.candidates :]])


async def unit_groups(
    index: UnitIndex, tree: LineTree, observation: FilterInput, *, top_k: int = 10,
    context: int = 1,
) -> list[Group]:
    """The ``top_k`` units most similar to the query (in the reranker's order when the
    index has one), best first, each as its anchor line and the unit's line with
    ± ``context`` lines."""
    units, vectors = await index.units(tree)
    if vectors is None or not units:
        return []
    text = query_text(observation)
    query = normalised(await index.embedder.embed([text]), 1, "embedder")
    scores = vectors @ query[0]
    order = await index.rerank(text, units, np.argsort(-scores, kind="stable"))
    groups: list[Group] = []
    for best in order[:top_k]:
        unit = units[int(best)]
        lines = {unit.anchor}
        lines.update(range(max(0, unit.index - context),
                           min(len(tree), unit.index + context + 1)))
        groups.append(Group("units", tuple(sorted(lines))))
    return groups
