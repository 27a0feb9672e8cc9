"""Token counting with tiktoken, working offline.

tiktoken downloads its encodings on first use. Where that cannot work (no internet),
the ``bpe-openai`` package ships o200k_base and cl100k_base; their sha256 match the
hashes tiktoken checks. Before the first load, any missing encoding file is placed in
tiktoken's cache folder (``TIKTOKEN_CACHE_DIR``, by default under linewise's cache), so
no network timeout is ever paid.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from functools import cache
from importlib import util
from pathlib import Path
from typing import Any

import tiktoken

from .errors import ConfigError

DEFAULT_ENCODING = "o200k_base"
_BLOBS = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}
# OpenAI's accounting for chat messages: a few tokens per message and for the reply.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3


def tiktoken_cache_dir() -> Path:
    """tiktoken's cache folder, choosing linewise's cache when the user set none."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return Path(os.environ["TIKTOKEN_CACHE_DIR"])
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return Path(os.environ["DATA_GYM_CACHE_DIR"])
    from .local_model import cache_root

    path = cache_root() / "tiktoken"
    os.environ["TIKTOKEN_CACHE_DIR"] = str(path)
    return path


def _shipped_file(name: str) -> Path | None:
    spec = util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for candidate in (Path(folder) / "data" / f"{name}.tiktoken.gz",
                          Path(folder) / "data" / f"{name}.tiktoken"):
            if candidate.is_file():
                return candidate
    return None


def prime_cache(name: str) -> Path | None:
    """Place the encoding's file in tiktoken's cache from bpe-openai, if it is missing.

    Returns the cache file, or None for an encoding linewise has no copy of.
    """
    if name not in _BLOBS:
        return None
    url, expected = _BLOBS[name]
    cache_dir = tiktoken_cache_dir()
    target = cache_dir / hashlib.sha1(url.encode()).hexdigest()
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == expected:
        return target
    shipped = _shipped_file(name)
    if shipped is None:
        return None
    raw = shipped.read_bytes()
    data = gzip.decompress(raw) if shipped.suffix == ".gz" else raw
    if hashlib.sha256(data).hexdigest() != expected:
        raise ConfigError(f"{shipped} does not match tiktoken's sha256 for {name}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return target


@cache
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The named tiktoken encoding, loaded offline when bpe-openai has it."""
    prime_cache(name)
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # tiktoken raises requests' and its own errors
        raise ConfigError(
            f"tiktoken cannot load {name!r} and no offline copy exists: {exc}"
        ) from exc


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    if not text:
        return 0
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


def count_message_tokens(
    messages: list[dict[str, Any]], encoding: str = DEFAULT_ENCODING
) -> int:
    """Tokens of a chat request: contents plus the per-message framing."""
    total = TOKENS_PER_REPLY
    for message in messages:
        total += TOKENS_PER_MESSAGE + count_tokens(str(message.get("role", "")), encoding)
        content = message.get("content")
        if isinstance(content, str):
            total += count_tokens(content, encoding)
        elif isinstance(content, list):  # multimodal parts: count the text ones
            total += sum(count_tokens(p.get("text", ""), encoding) for p in content
                         if isinstance(p, dict))
    return total
