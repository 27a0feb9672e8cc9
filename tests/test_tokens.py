"""Token counting works offline: tiktoken's cache is filled from bpe-openai's files."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tiktoken.load import load_tiktoken_bpe

from linewise.errors import ConfigError
from linewise.tokens import (
    TOKENS_PER_IMAGE,
    count_message_tokens,
    count_tokens,
    count_tokens_each,
    get_encoding,
    seed_tiktoken_cache,
    tiktoken_cache_dir,
)

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def _offline_env(cache_dir: Path) -> dict[str, str]:
    """An environment where any HTTP(S) request fails at once (a closed local proxy)."""
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    env.update(
        TIKTOKEN_CACHE_DIR=str(cache_dir),
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        NO_PROXY="",
    )
    return env


def _run_offline(code: str, cache_dir: Path) -> dict[str, object]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_offline_env(cache_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    output: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    output["seconds"] = time.monotonic() - started
    return output


@pytest.mark.slow
def test_counting_works_offline_from_an_empty_cache(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    out = _run_offline(
        """
        import json
        from linewise.tokens import count_message_tokens, count_tokens
        print(json.dumps({
            "o200k": count_tokens("hello world"),
            "cl100k": count_tokens("hello world", "cl100k_base"),
            "harmony": count_tokens("hello world", "o200k_harmony"),
            "messages": count_message_tokens([{"role": "user", "content": "hello world"}]),
        }))
        """,
        cache,
    )
    assert out["o200k"] == 2 and out["cl100k"] == 2 and out["harmony"] == 2
    assert out["messages"] == 3 + 1 + 2 + 3
    assert float(out["seconds"]) < 60  # no network timeout was paid
    files = {p.name: p for p in cache.iterdir()}
    o200k_key = hashlib.sha1(O200K_URL.encode()).hexdigest()
    cl100k_key = hashlib.sha1(CL100K_URL.encode()).hexdigest()
    assert set(files) == {o200k_key, cl100k_key}
    assert hashlib.sha256(files[o200k_key].read_bytes()).hexdigest() == O200K_SHA256


def test_a_corrupt_cache_file_is_replaced_offline(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    key = hashlib.sha1(O200K_URL.encode()).hexdigest()
    (cache / key).write_bytes(b"not a bpe file")
    out = _run_offline(
        """
        import json
        from linewise.tokens import count_tokens
        print(json.dumps({"n": count_tokens("The quick brown fox.")}))
        """,
        cache,
    )
    assert out["n"] == 5
    assert hashlib.sha256((cache / key).read_bytes()).hexdigest() == O200K_SHA256


def test_an_encoding_without_a_shipped_file_fails_cleanly_offline(tmp_path: Path) -> None:
    out = _run_offline(
        """
        import json
        from linewise.errors import ConfigError
        from linewise.tokens import get_encoding
        try:
            get_encoding("r50k_base")
        except ConfigError as exc:
            print(json.dumps({"error": str(exc)}))
        """,
        tmp_path,
    )
    assert "r50k_base" in str(out["error"]) and "o200k_base" in str(out["error"])


def test_seeding_writes_tiktokens_cache_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    target = seed_tiktoken_cache("o200k_base")
    assert target == tmp_path / hashlib.sha1(O200K_URL.encode()).hexdigest()
    assert hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256
    mtime = target.stat().st_mtime_ns
    assert seed_tiktoken_cache("o200k_base") == target  # already good: left alone
    assert target.stat().st_mtime_ns == mtime
    # and tiktoken reads it from there (no download: the cache hit is checked first)
    ranks = load_tiktoken_bpe(O200K_URL, O200K_SHA256)
    assert len(ranks) == 199_998
    assert get_encoding().decode(list(ranks.values())[:3]) == "!\"#"


def test_seeding_is_skipped_when_it_cannot_help(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert seed_tiktoken_cache("r50k_base") is None
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # the user disabled tiktoken's cache
    assert seed_tiktoken_cache("o200k_base") is None


def test_the_cache_dir_defaults_under_linewise_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("LINEWISE_CACHE_DIR", str(tmp_path))
    assert tiktoken_cache_dir() == tmp_path / "tiktoken"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tmp_path / "tiktoken")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "mine"))
    assert tiktoken_cache_dir() == tmp_path / "mine"


def test_unknown_encoding_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no_such_encoding"):
        get_encoding("no_such_encoding")


def test_get_encoding_is_cached() -> None:
    assert get_encoding() is get_encoding("o200k_base")
    assert get_encoding().name == "o200k_base"


def test_count_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    # special-token text from a web page is ordinary text, not an error
    assert count_tokens("<|endoftext|>") > 1
    page = "\n".join(f"[{i}] button 'Submit {i}'" for i in range(200))
    assert count_tokens(page) == len(get_encoding().encode_ordinary(page))


def test_count_message_tokens() -> None:
    hello = count_tokens("hello world")
    assert count_message_tokens([]) == 3
    assert count_message_tokens([{"role": "user", "content": "hello world"}]) == 3 + 1 + hello + 3
    named = [{"role": "user", "name": "bob", "content": "hello world"}]
    assert count_message_tokens(named) == 3 + 1 + 1 + 1 + hello + 3
    parts = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hello world"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        }
    ]
    assert count_message_tokens(parts) == 3 + 1 + hello + TOKENS_PER_IMAGE + 3
    call = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "click", "arguments": '{"bid": "12"}'},
                }
            ],
        }
    ]
    expected = 3 + 1 + count_tokens("click") + count_tokens('{"bid": "12"}') + 3
    assert count_message_tokens(call) == expected
    assert count_message_tokens(
        [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}],
        encoding="cl100k_base",
    ) == 2 * (3 + 1 + 1) + 3


def test_count_tokens_each_counts_as_count_tokens_does() -> None:
    texts = ["\t[12] button 'OK', clickable\n", "", "<|endoftext|> in a page", "é" * 50]
    assert count_tokens_each(texts) == [count_tokens(t) for t in texts]
