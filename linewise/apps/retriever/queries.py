"""Queries a model writes from a passage, describing it without naming it.

A paraphrased goal shares no content word with the line it needs; training for it
needs such queries in numbers, on pages nobody wrote goals for. Here a chat model reads
one unit of a page (:mod:`.examples`) and writes what a user would ask for it, with the
element's own words (its name, its anchor's name) banned. The ban is checked, not
trusted: a query that still shares a content word with the element's line or its anchor,
or is too short or too long, is asked once more at a higher temperature and dropped if
it fails again, so every ``written`` example holds to the paraphrase rule the held-out
cases are built by (``benchmarks/make_filter_cases.py``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from linewise.agent.filters.stages.context_embedding import Unit, page_units
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.models import ChatModel
from linewise.agent.text.bm25 import line_words, words
from linewise.apps.retriever.examples import Example, negatives_for
from linewise.apps.retriever.sources import PageSnapshot
from linewise.prompts import render_prompt

__all__ = ["WrittenStats", "written_examples"]

_MIN_UNIT_WORDS = 8
"""A unit shorter than this says too little to be described without its name."""
_QUERY_WORDS = (5, 30)
_RETRY_TEMPERATURE = 0.8
_MAX_TOKENS = 80
_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class WrittenStats:
    asked: int = 0
    written: int = 0
    dropped: int = 0


def _banned(tree: LineTree, unit: Unit) -> tuple[list[str], set[str]]:
    """The words of the element's name and its anchor's name as the prompt shows them,
    and the content words (stems) a query must not share with their lines."""
    names = " ".join(tree.parsed(i).name or "" for i in {unit.index, unit.anchor})
    shown = sorted({w for w in _WORD.findall(names.lower().replace("_", " "))
                    if words(w)})
    stems = set(line_words(tree.lines[unit.index])) | set(line_words(tree.lines[unit.anchor]))
    return shown, stems


def _acceptable(query: str, banned: set[str]) -> bool:
    count = len(query.split())
    return _QUERY_WORDS[0] <= count <= _QUERY_WORDS[1] and not set(words(query)) & banned


def _clean(text: str) -> str:
    first = text.strip().split("\n", 1)[0].strip().strip('"').strip()
    return first.removeprefix("Question:").removeprefix("Request:").strip()


async def written_examples(
    snapshots: Sequence[PageSnapshot], model: ChatModel, *, per_page: int = 10,
    negatives: int = 3, seed: int = 0,
    progress: Callable[[WrittenStats], None] | None = None,
) -> tuple[list[Example], WrittenStats]:
    """Up to ``per_page`` written examples of each page (units drawn with ``seed``)."""
    stats = WrittenStats()
    examples: list[Example] = []
    for snapshot in snapshots:
        tree = LineTree(list(snapshot.lines))
        units = page_units(tree)
        rng = random.Random(f"{seed}:written:{snapshot.url}")
        chosen = [u for u in units if len(u.text.split()) >= _MIN_UNIT_WORDS]
        rng.shuffle(chosen)
        for unit in chosen[:per_page]:
            shown, banned = _banned(tree, unit)
            if not shown or not banned:
                continue
            stats.asked += 1
            query = await _write(model, unit.text, shown, banned)
            if query is None:
                stats.dropped += 1
            else:
                stats.written += 1
                examples.append(Example(
                    query=query, positive=unit.text, kind="written", family=snapshot.family,
                    source=snapshot.url,
                    negatives=negatives_for(units, query, unit, negatives, rng)))
            if progress is not None:
                progress(stats)
    return examples, stats


async def _write(model: ChatModel, passage: str, shown: list[str],
                 banned: set[str]) -> str | None:
    prompt = render_prompt("retriever_query.md", banned=", ".join(shown), passage=passage)
    messages = [{"role": "user", "content": prompt}]
    for temperature in (0.0, _RETRY_TEMPERATURE):
        completion = await model.complete(messages, temperature=temperature,
                                          max_tokens=_MAX_TOKENS)
        query = _clean(completion.text)
        if _acceptable(query, banned):
            return query
    return None
