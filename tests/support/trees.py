"""Captured AXTrees (tests/data/trees) and helpers to find lines in them."""

from __future__ import annotations

import re

import numpy as np

from linewise.agent.text.bm25 import words
from tests.support.paths import TREES


def tree_lines(name: str) -> list[str]:
    return (TREES / name).read_text().split("\n")


def line_of(lines: list[str], pattern: str) -> int:
    """0-based index of the first line matching ``pattern``."""
    return next(i for i, line in enumerate(lines) if re.search(pattern, line))


class WordHashEmbedder:
    """A deterministic bag-of-words embedder: texts sharing words are similar."""

    name = "word-hash"

    async def embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), 256))
        for row, text in enumerate(texts):
            for word in words(text):
                vectors[row, sum(map(ord, word)) % 256] += 1.0
        return vectors + 1e-6
