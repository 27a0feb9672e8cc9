"""A trained retriever, loaded from its weights folder and run with onnxruntime.

A weights folder (written by ``linewise.apps.retriever.export``) holds:

- ``model.onnx``: the encoder, int8 (dynamic quantisation), whose inputs are
  ``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64 ``[batch, seq]``) and
  whose one output ``sentence_embedding`` (float32 ``[batch, dim]``) is already mean
  pooled over the mask and L2-normalised: nothing is computed outside the graph;
- ``tokenizer.json``: its WordPiece tokenizer;
- ``manifest.json``: the format and its version, its ``kind``, the base model, the data
  sources, the command and seed that trained it, its metrics, and the sha256 and size
  of every file.

A folder is of one of two kinds. An ``embedder`` (the default when a manifest names no
kind) is a bi-encoder, read by :class:`TrainedEmbedder`. A ``reranker`` is a
cross-encoder whose graph reads ``[CLS] query [SEP] text [SEP]`` pairs (token types 0
then 1, truncated longest-first as ``tokenizers`` does) and whose one output
``relevance`` (float32 ``[batch]``) scores each pair, read by :class:`TrainedReranker`.

:class:`TrainedEmbedder` and :class:`TrainedReranker` refuse a folder unless the
manifest reads, is of this format and of their kind, and every file it lists is there
with its size and sha256: a weights folder is data that a user may point at, edit or
half-copy, and a damaged model would not fail, it would silently rank lines badly. Each
refusal is a ``ModelError`` naming the file. Hashes are computed once per process per
file state (path, size, mtime); nothing is written into the folder, which may be
read-only package data.

Inference imports only onnxruntime, tokenizers and numpy (never JAX).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from linewise.agent.text.embedders import bert_feeds, bert_tokenizer, onnx_session
from linewise.errors import ConfigError, ModelError
from linewise.files import sha256_file

log = structlog.get_logger(__name__)

__all__ = [
    "EMBEDDER_KIND",
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "MODEL_NAME",
    "OUTPUT_NAME",
    "RERANKER_KIND",
    "RERANKER_OUTPUT",
    "TOKENIZER_NAME",
    "TrainedEmbedder",
    "TrainedReranker",
    "folder_kind",
    "manifest_kind",
    "open_weights",
    "open_weights_by_kind",
    "read_manifest",
]

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "linewise-retriever-weights"
MANIFEST_VERSION = 1
MODEL_NAME = "model.onnx"
TOKENIZER_NAME = "tokenizer.json"
OUTPUT_NAME = "sentence_embedding"
RERANKER_OUTPUT = "relevance"
EMBEDDER_KIND = "embedder"
RERANKER_KIND = "reranker"
_REQUIRED_FILES = (MODEL_NAME, TOKENIZER_NAME)

_verified: dict[tuple[str, int, int], str] = {}
_verified_lock = threading.Lock()


def _hash(path: Path) -> str:
    """sha256 of ``path``, remembered for this process while its size and mtime hold."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _verified_lock:
        known = _verified.get(key)
    if known is None:
        known = sha256_file(path)
        with _verified_lock:
            _verified[key] = known
    return known


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a weights folder, after checking every file it lists.

    Raises:
        ModelError: the folder or its manifest is missing, the manifest is not JSON or
            not of this format, or a file is missing, of another size or sha256.
    """
    manifest_path = folder / MANIFEST_NAME
    if not folder.is_dir():
        raise ModelError(f"The retriever weights folder {folder} does not exist")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ModelError(
            f"{manifest_path} is missing: {folder} is not a retriever weights folder "
            "(one is written by linewise's retriever export)"
        ) from exc
    except (OSError, ValueError) as exc:
        raise ModelError(f"{manifest_path} cannot be read as JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise ModelError(f"{manifest_path} is not a {MANIFEST_FORMAT} manifest")
    if manifest.get("version") != MANIFEST_VERSION:
        raise ModelError(
            f"{manifest_path} has version {manifest.get('version')!r}; this linewise reads "
            f"version {MANIFEST_VERSION}: export the weights again"
        )
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise ModelError(f"{manifest_path} lists no files")
    for name in _REQUIRED_FILES:
        if name not in files:
            raise ModelError(f"{manifest_path} does not list {name}")
    for name, entry in files.items():
        if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith("."):
            raise ModelError(f"{manifest_path} lists a file outside the folder: {name!r}")
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise ModelError(f"{manifest_path} has no sha256 for {name}")
        path = folder / name
        if not path.is_file():
            raise ModelError(f"{path} is missing (listed in {manifest_path})")
        size = path.stat().st_size
        if entry.get("size") is not None and size != entry["size"]:
            raise ModelError(
                f"{path} has {size} bytes, its manifest says {entry['size']}: "
                "the folder is damaged or was copied in part"
            )
        actual = _hash(path)
        if actual != entry["sha256"]:
            raise ModelError(
                f"{path} has sha256 {actual}, its manifest says {entry['sha256']}: "
                "the file is damaged or does not belong to this manifest"
            )
    return manifest


def manifest_kind(manifest: dict[str, Any]) -> str:
    """``embedder`` or ``reranker``: what a verified manifest's folder holds."""
    return str(manifest.get("kind") or EMBEDDER_KIND)


def folder_kind(folder: Path) -> str:
    """What a weights folder's manifest says it holds, read without checking its files
    (that is done when it loads, and reported then): ``embedder`` when the manifest
    cannot be read, so that the loader names what is wrong."""
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return EMBEDDER_KIND
    return manifest_kind(manifest) if isinstance(manifest, dict) else EMBEDDER_KIND


class _Runtime:
    """A loaded tokenizer and ONNX session; ``run`` is serialised (2-core machines)."""

    def __init__(self, folder: Path, max_length: int, threads: int, output: str) -> None:
        try:
            import onnxruntime  # noqa: F401
            import tokenizers  # noqa: F401
        except ImportError as exc:
            raise ModelError(
                "A trained retriever needs onnxruntime and tokenizers: "
                "pip install 'linewise[embedding]'"
            ) from exc
        try:
            tokenizer = bert_tokenizer(folder / TOKENIZER_NAME, max_length)
        except Exception as exc:
            raise ModelError(f"Cannot load {folder / TOKENIZER_NAME}: {exc}") from exc
        try:
            session = onnx_session(folder / MODEL_NAME, threads)
        except Exception as exc:
            raise ModelError(f"Cannot load {folder / MODEL_NAME}: {exc}") from exc
        outputs = [o.name for o in session.get_outputs()]
        if output not in outputs:
            raise ModelError(
                f"{folder / MODEL_NAME} has outputs {outputs}, not {output!r}"
            )
        self.tokenizer = tokenizer
        self.session = session
        self.output = output
        self.input_names = {i.name for i in session.get_inputs()}
        self._lock = threading.Lock()

    def run(self, texts: list[str]) -> np.ndarray:
        return self._run(bert_feeds(self.tokenizer, texts, self.input_names))

    def run_pairs(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(pairs)
        feeds = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        return self._run({k: v for k, v in feeds.items() if k in self.input_names})

    def _run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        with self._lock:
            values = self.session.run([self.output], feeds)[0]
        result: np.ndarray = np.asarray(values, dtype=np.float32)
        return result


class _WeightsFolder:
    """A weights folder of one kind, verified and loaded once, on first use.

    Args:
        folder: The weights folder.
        batch_size: Texts run together.
        max_length: Tokens a text (or pair) is truncated at; by default the length the
            model was trained at (the manifest's ``max_length``).
        threads: onnxruntime intra-op threads; 0 lets onnxruntime choose.
    """

    kind = EMBEDDER_KIND
    output = OUTPUT_NAME

    def __init__(self, folder: Path | str, *, batch_size: int = 32,
                 max_length: int | None = None, threads: int = 0) -> None:
        if batch_size < 1 or threads < 0 or (max_length is not None
                                             and not 1 <= max_length <= 512):
            raise ConfigError(
                f"{type(self).__name__} needs batch_size >= 1, threads >= 0, "
                "1 <= max_length <= 512"
            )
        self.folder = Path(folder).expanduser()
        self.name = f"trained:{self.folder.name}"
        self.batch_size = batch_size
        self.threads = threads
        self._max_length = max_length
        self._runtime: _Runtime | None = None
        self._manifest: dict[str, Any] | None = None
        self._load_lock = threading.Lock()

    @property
    def manifest(self) -> dict[str, Any]:
        """The verified manifest (loads the folder)."""
        self.load()
        assert self._manifest is not None
        return self._manifest

    def load(self) -> None:
        """Verify the folder and load the model now (otherwise on first use).

        Raises:
            ModelError: see :func:`read_manifest`; the folder holds the other kind; or
                onnxruntime cannot load the model.
        """
        with self._load_lock:
            if self._runtime is not None:
                return
            manifest = read_manifest(self.folder)
            kind = manifest_kind(manifest)
            if kind != self.kind:
                raise ModelError(
                    f"{self.folder} holds a retriever of kind {kind!r} (its manifest "
                    f"says so); {type(self).__name__} reads kind {self.kind!r}"
                )
            max_length = self._max_length or int(manifest.get("max_length") or 256)
            self._runtime = _Runtime(self.folder, max_length, self.threads, self.output)
            self._manifest = manifest
            log.info("trained retriever loaded", folder=str(self.folder), kind=kind,
                     base=manifest.get("base_model", {}).get("name"))

    def _loaded(self) -> _Runtime:
        self.load()
        assert self._runtime is not None
        return self._runtime

    def _by_length(self, texts: list[str], shape: tuple[int, ...],
                   run: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """``run`` over ``batch_size`` texts at a time, the shortest together (little
        padding), its rows put back in the texts' order."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), *shape), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            out[batch] = run([texts[i] for i in batch])
        return out


class TrainedEmbedder(_WeightsFolder):
    """A trained encoder from a weights folder: an :class:`~.embedders.Embedder`.

    The folder is verified and the model loaded once, on first use (:meth:`load` does
    it eagerly). Texts are embedded ``batch_size`` at a time, sorted by length so that
    little padding is computed, in a worker thread so the event loop keeps running.
    Texts are truncated at ``max_length`` tokens, by default the length the model was
    trained at (the manifest's ``max_length``).
    """

    @property
    def dimension(self) -> int:
        return int(self.manifest.get("dimension", 0))

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        """One unit float32 vector per text (blocking; :meth:`embed` runs it in a thread)."""
        runtime = self._loaded()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._by_length(texts, (self.dimension,), runtime.run)

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One unit float32 vector per text, computed in a worker thread."""
        return await asyncio.to_thread(self.embed_sync, texts)


class TrainedReranker(_WeightsFolder):
    """A trained cross-encoder from a weights folder: scores (query, text) pairs.

    It reads a query and a text together, so it costs one pass per pair: it reorders
    the few best candidates of a cheaper ranker, never a whole page. Pairs are scored
    ``batch_size`` at a time, shortest texts together, in a worker thread; a pair is
    truncated at ``max_length`` tokens (by default the manifest's), the longer side first.
    """

    kind = RERANKER_KIND
    output = RERANKER_OUTPUT

    def score_sync(self, query: str, texts: list[str]) -> np.ndarray:
        """One float32 relevance per text, higher is more relevant (blocking)."""
        runtime = self._loaded()
        return self._by_length(texts, (), lambda batch: runtime.run_pairs(
            [(query, text) for text in batch]))

    async def score(self, query: str, texts: list[str]) -> np.ndarray:
        """One float32 relevance per text, computed in a worker thread."""
        return await asyncio.to_thread(self.score_sync, query, texts)


def open_weights(folder: Path | str) -> TrainedEmbedder | TrainedReranker:
    """The reader of a weights folder's kind, its manifest checked now.

    Raises:
        ModelError: see :func:`read_manifest`.
    """
    folder = Path(folder).expanduser()
    if manifest_kind(read_manifest(folder)) == RERANKER_KIND:
        return TrainedReranker(folder)
    return TrainedEmbedder(folder)


def open_weights_by_kind(folders: Sequence[Path | str]
                         ) -> tuple[list[TrainedEmbedder], list[TrainedReranker]]:
    """:func:`open_weights` of each folder, the embedders apart from the rerankers."""
    embedders: list[TrainedEmbedder] = []
    rerankers: list[TrainedReranker] = []
    for folder in folders:
        weights = open_weights(folder)
        if isinstance(weights, TrainedReranker):
            rerankers.append(weights)
        else:
            embedders.append(weights)
    return embedders, rerankers
