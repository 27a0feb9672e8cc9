"""The embedding-retrieval baseline of the LineRetriever paper (section 4.2).

The query is the task goal plus the history of past actions (as in Dense Markup
Ranker). The observation is cut into chunks of ``chunk_tokens`` o200k_base tokens that
overlap by about ``overlap_tokens`` (:mod:`..text.chunking`); query and chunks are embedded
(:mod:`..text.embedders`), the vectors are L2-normalised and scored by cosine similarity, and
the ``top_k`` best chunks are shown in page order. The paper uses 100-token chunks, a
10-token overlap, the 10 best chunks and OpenAI's ``text-embedding-3-small``.

The filter keeps the union of the chosen chunks' lines and shows every run of dropped
lines as one marker line (:func:`render.render_with_markers`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import structlog

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.agent.filters.view.render import line_ranges, render_with_markers
from linewise.agent.text.chunking import Chunk, chunk_lines
from linewise.agent.text.embedders import Embedder, normalised
from linewise.errors import ConfigError, LLMError
from linewise.tokens import DEFAULT_ENCODING, count_tokens

log = structlog.get_logger(__name__)

__all__ = ["EmbeddingFilter", "build_query"]


def build_query(goal: str, history: Sequence[str], history_limit: int | None = None) -> str:
    """The retrieval query: the goal, then the past actions (the last ``history_limit``)."""
    actions = [a.strip() for a in history if a.strip()]
    if history_limit is not None:
        actions = actions[-history_limit:] if history_limit > 0 else []
    query = goal.strip()
    if actions:
        query += "\nPrevious actions:\n" + "\n".join(actions)
    return query


class EmbeddingFilter:
    """Keep the lines of the ``top_k`` chunks most similar to goal + action history.

    Raises (from :meth:`apply`):
        ModelError / ConfigError: the local model or the settings cannot work.

    A failing embedding endpoint (``LLMError``) does not raise: the full tree is shown
    and ``fallback_reason`` says why.

    Chunk vectors are remembered (up to ``cache_size`` texts, least recently used
    dropped): a page that barely changes between steps is mostly not embedded again.
    One filter serves one episode, so the cache lives as long as the episode.
    """

    name = "embedding"

    def __init__(
        self,
        embedder: Embedder,
        top_k: int = 10,
        chunk_tokens: int = 100,
        overlap_tokens: int = 10,
        *,
        history_limit: int | None = None,
        encoding: str = DEFAULT_ENCODING,
        cache_size: int = 4096,
    ) -> None:
        if top_k < 1:
            raise ConfigError(f"top_k must be at least 1, not {top_k}")
        if cache_size < 0:
            raise ConfigError(f"cache_size must be >= 0, not {cache_size}")
        chunk_lines([], chunk_tokens, overlap_tokens, encoding)  # validates the sizes
        self.embedder = embedder
        self.top_k = top_k
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.history_limit = history_limit
        self.encoding = encoding
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    async def apply(self, observation: FilterInput) -> FilterResult:
        """Score the chunks against the query and render the kept lines with markers."""
        started = time.perf_counter()
        lines = observation.lines
        tokens_full = (
            observation.full_tokens
            if self.encoding == DEFAULT_ENCODING
            else count_tokens(observation.text, self.encoding)
        )
        chunks = chunk_lines(lines, self.chunk_tokens, self.overlap_tokens, self.encoding)
        notes: dict[str, object] = {
            "embedder": self.embedder.name,
            "n_chunks": len(chunks),
            "top_k": self.top_k,
        }
        if len(chunks) <= self.top_k:
            # Every chunk would be shown: no need to ask the embedder.
            chosen = list(range(len(chunks)))
            notes["chosen"] = chosen
            notes["all_chunks_kept"] = True
        else:
            query = build_query(observation.goal, [a.text for a in observation.history],
                                self.history_limit)
            embed_started = time.perf_counter()
            try:
                scores, embedded = await self._scores(query, chunks)
            except LLMError as exc:
                log.warning("embedding failed, showing the full tree", error=str(exc))
                return FilterResult(
                    name=self.name,
                    text=observation.text,
                    kept_lines=list(range(1, len(lines) + 1)),
                    shown_bids=observation.bids_on(range(1, len(lines) + 1)),
                    ranges=[(1, len(lines))],
                    tokens_full=tokens_full,
                    tokens_shown=tokens_full,
                    latency_ms=(time.perf_counter() - started) * 1000,
                    fallback_reason=f"embedding failed: {exc}",
                    notes=notes,
                )
            notes["embed_ms"] = round((time.perf_counter() - embed_started) * 1000, 1)
            notes["embedded"] = embedded
            best = np.argsort(-scores, kind="stable")[: self.top_k]  # ties: page order
            chosen = sorted(int(i) for i in best)
            notes["chosen"] = chosen
            notes["scores"] = [round(float(scores[i]), 4) for i in chosen]
        kept = sorted({n for i in chosen for n in chunks[i].line_numbers})
        text = render_with_markers(lines, kept)
        result = FilterResult(
            name=self.name,
            text=text,
            kept_lines=kept,
            shown_bids=observation.bids_on(kept),
            ranges=line_ranges(kept),
            tokens_full=tokens_full,
            tokens_shown=count_tokens(text, self.encoding),
            latency_ms=(time.perf_counter() - started) * 1000,
            notes=notes,
        )
        log.debug(
            "embedding filter",
            n_chunks=len(chunks),
            kept_lines=len(kept),
            reduction=round(result.reduction, 3),
            latency_ms=round(result.latency_ms, 1),
        )
        return result

    async def _scores(self, query: str, chunks: Sequence[Chunk]) -> tuple[np.ndarray, int]:
        """Cosine similarity of each chunk to the query, and how many texts were sent.

        Texts not in the cache go to the embedder in one call.
        """
        texts = [query, *(c.text for c in chunks)]
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        fresh: dict[str, np.ndarray] = {}
        if missing:
            raw = await self.embedder.embed(missing)
            fresh = dict(
                zip(missing, normalised(raw, len(missing), self.embedder.name), strict=True)
            )
        vectors = np.stack([fresh[t] if t in fresh else self._cache[t] for t in texts])
        for text in texts:
            self._remember(text, fresh.get(text))
        return vectors[1:] @ vectors[0], len(missing)

    def _remember(self, text: str, vector: np.ndarray | None) -> None:
        """Put a new vector in the cache, or mark a cached one as recently used."""
        if self.cache_size == 0:
            return
        if vector is None:
            if text in self._cache:  # it may have been pushed out by this step's texts
                self._cache.move_to_end(text)
            return
        self._cache[text] = vector
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
