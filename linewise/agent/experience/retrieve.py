"""Retrieval: the memory's entries most like the current goal and page, as examples.

Entries are ranked by BM25 over their goal and the elements they acted on and, where
the embedder that built the entries' vectors is available, by cosine similarity too; the
two rankings are fused by reciprocal rank (neither score's scale matters). Without the embedder the
ranking is lexical and the shown record says why.

An episode retrieves once, on its goal and first page, and keeps its examples for every
step: the prompt's prefix then stays the same and llama.cpp's prefix cache keeps it.
Entries of the running task and seed are never candidates; entries of the running task
with another seed come first (the same page family and goal template, as Synapse's
exemplars are retrieved by task), then the rest by fused rank.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import structlog

from linewise.agent.experience.store import (
    MemoryEntry,
    same_task_and_seed,
    task_key,
)
from linewise.agent.experience.untrusted import safe_entry
from linewise.agent.text.bm25 import LineRanker, words
from linewise.agent.text.embedders import Embedder
from linewise.errors import LinewiseError
from linewise.prompts import render_prompt
from linewise.records import MemoryShown
from linewise.tokens import count_tokens

log = structlog.get_logger(__name__)

_BID = re.compile(r"\[[A-Za-z0-9]+\]")
QUERY_PAGE_LINES = 60
"""Lines of the first page that go into the query: its top says what the page is."""
RRF_K = 60
MAX_THOUGHT_CHARS = 200


@dataclass(frozen=True)
class Examples:
    """The examples block of an episode's prompts, and what it showed."""

    text: str
    shown: MemoryShown


NO_EXAMPLES = Examples("", MemoryShown())


def _bag(text: str) -> Counter[str]:
    return Counter(words(_BID.sub(" ", text)))


def render_entry(number: int, entry: MemoryEntry) -> str:
    """One entry as a worked example (``prompts/action_example.md``): per step, the
    element it acted on, its thought and its action, as ``untrusted.safe_entry`` lets
    them be shown (an entry with nothing to show renders as nothing)."""
    safe = safe_entry(entry)
    if safe is None:
        return ""
    lines: list[str] = []
    for position, step in enumerate(safe.steps, 1):
        lines.append(f"Step {position}, acted on: {step.observation}" if step.observation
                     else f"Step {position}:")
        thought = " ".join(step.think.split())
        if len(thought) > MAX_THOUGHT_CHARS:
            thought = thought[: MAX_THOUGHT_CHARS - 1] + "…"
        if thought:
            lines.append(f"  thought: {thought}")
        lines.append(f"  action: {step.action}")
    return render_prompt("action_example.md", number=number, goal=" ".join(entry.goal.split()),
                         steps="\n".join(lines))


def render_examples(entries: list[MemoryEntry]) -> str:
    """The examples block (``prompts/action_examples.md``); empty without entries
    (or with none that has a step to show)."""
    shown = [entry for entry in entries if safe_entry(entry) is not None]
    if not shown:
        return ""
    body = "\n".join(render_entry(n, e) for n, e in enumerate(shown, 1))
    return render_prompt("action_examples.md", examples=body.strip())


def _usable_vectors(
    vectors: dict[int, list[float]], size: int
) -> tuple[dict[int, np.ndarray], list[int]]:
    """The vectors of ``size`` finite numbers, and the entries whose vectors are not."""
    usable: dict[int, np.ndarray] = {}
    unusable: list[int] = []
    for index, vector in vectors.items():
        array = np.asarray(vector, dtype=np.float32)
        if array.shape == (size,) and bool(np.isfinite(array).all()):
            usable[index] = array
        else:
            unusable.append(index)
    return usable, unusable


class ExperienceMemory:
    """A loaded memory: ``examples`` picks and renders an episode's worked examples.

    Args:
        entries: the memory's entries.
        k: at most this many examples.
        budget_tokens: the examples block never takes more (tiktoken count); examples
            that would overflow it are left out, best ones first kept.
        embedder: the embedder to rank with, if any; only entries embedded by the same
            embedder (``Embedder.name``) are compared by vector.
    """

    def __init__(
        self,
        entries: list[MemoryEntry],
        *,
        k: int = 3,
        budget_tokens: int = 1500,
        embedder: Embedder | None = None,
    ) -> None:
        # Only what an example may show is ranked and shown: an entry's page text (an
        # older memory's excerpts) neither reaches the prompt nor steers the ranking.
        self.entries = [safe for entry in entries if (safe := safe_entry(entry)) is not None]
        self.k = k
        self.budget_tokens = budget_tokens
        self.embedder = embedder
        texts = [e.search_text() for e in entries]
        self.ranker = LineRanker(texts, word_counts=[_bag(t) for t in texts])

    async def examples(self, task_id: str, goal: str, page: str, seed: int | None = None
                       ) -> Examples:
        """The examples for an episode of ``task_id`` (and ``seed``) on its first page."""
        running = task_key(task_id, seed)
        candidates = [i for i, e in enumerate(self.entries)
                      if not same_task_and_seed(e.key, running)]
        if not candidates or self.k < 1:
            return NO_EXAMPLES
        query = "\n".join([goal, *page.splitlines()[:QUERY_PAGE_LINES]])
        lexical = self.ranker.scores(query)
        # An entry sharing no word with the query gets no lexical vote: a tie of zeros
        # is no ranking, and would outvote the embedder's.
        rankings = [sorted((i for i in candidates if lexical[i] > 0),
                           key=lambda i: (-lexical[i], i))]
        similarity, note = await self._similarity(query, candidates)
        if similarity is not None:
            rankings.append(sorted(candidates, key=lambda i: (-similarity[i], i)))
        fused: dict[int, float] = {i: 0.0 for i in candidates}
        for ranking in rankings:
            for rank, index in enumerate(ranking):
                fused[index] += 1 / (RRF_K + rank)
        # A small model copies an example's values and actions: an entry of another task
        # that merely shares words (enter-text-dynamic's for click-widget) ranked above
        # the running task's own entry of another seed, and misled it.
        ordered = sorted(candidates, key=lambda i: (self.entries[i].key.task != running.task,
                                                    -fused[i], i))
        chosen = self._fit([self.entries[i] for i in ordered])
        text = render_examples(chosen)
        return Examples(text, MemoryShown(
            entries=[e.id for e in chosen],
            retrieval="lexical+embedding" if similarity is not None else "lexical",
            note=note, tokens=count_tokens(text) if text else 0,
        ))

    def _fit(self, ordered: list[MemoryEntry]) -> list[MemoryEntry]:
        """The best entries, in order, whose block fits the budget (at most ``k``)."""
        chosen: list[MemoryEntry] = []
        for entry in ordered:
            if len(chosen) == self.k:
                break
            if count_tokens(render_examples([*chosen, entry])) <= self.budget_tokens:
                chosen.append(entry)
        return chosen

    async def _similarity(
        self, query: str, candidates: list[int]
    ) -> tuple[dict[int, float] | None, str | None]:
        """Cosine similarity of the query to each candidate, or None and why not."""
        if self.embedder is None:
            return None, "no embedder configured"
        name = self.embedder.name
        vectors = {i: vector for i in candidates
                   if self.entries[i].embedder == name and (vector := self.entries[i].embedding)}
        if not vectors:
            return None, f"no entry was embedded by {name}"
        try:
            embedded = await self.embedder.embed([query])
        except LinewiseError as exc:
            log.warning("memory retrieval is lexical only", error=str(exc))
            return None, f"embedder failed: {exc}"
        q = np.asarray(embedded, dtype=np.float32)[0]
        usable, unusable = _usable_vectors(vectors, q.size)
        note = None
        if unusable:
            # A vector of another size (a file edited or damaged by hand, another version
            # of the embedder) cannot be compared: its entry ranks lexically, the run goes on.
            note = (f"{len(unusable)} entries have vectors that are not unit vectors of "
                    f"{q.size} numbers ({', '.join(self.entries[i].id for i in unusable[:3])}"
                    f"{', …' if len(unusable) > 3 else ''}): they are ranked lexically")
            log.warning("memory vectors ignored", note=note)
        if not usable:
            return None, note
        # An entry without a usable vector of this embedder ranks after every one with one.
        return {i: float(np.dot(q, usable[i])) if i in usable else -2.0
                for i in candidates}, note

