"""Cutting an observation into overlapping token chunks of whole lines.

Chunks are cut on line boundaries, so a chunk is a run of whole lines and maps back to
1-based line numbers. A single line longer than a chunk is split into token windows
(overlapping by ``overlap_tokens``); a filter keeps such a line whole if any of its
windows is chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from linewise.errors import ConfigError
from linewise.tokens import DEFAULT_ENCODING, get_encoding

__all__ = ["Chunk", "chunk_lines"]


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
