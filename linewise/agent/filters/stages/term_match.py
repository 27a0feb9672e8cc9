"""Lines that a term names: what a goal or the retriever model's expansion points at.

A term is matched against the accessible names of the page's lines before its words are
scored (:func:`term_hits`), because the element a term stands for is usually the one
whose name starts with it, not the short line that mentions it most densely.

:func:`goal_terms` reads the terms a goal names verbatim: quoted text (``'Submit'``,
"Add to cart") and code-like words (``json.loads``, ``--malloc-fill``, ``max_retries``,
``innerText``, ``open()``). They become the ``named`` candidate stage, taken before
the plain BM25 hits, whose length normalisation scores a long entry
``json.loads(s, *, cls=None, …)`` below every short line that says ``loads``.

:func:`referred_entries` goes the other way, from lines to the entries they mention by
name (an in-page link, an option named in prose): the ``referred`` candidate stage.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from urllib.parse import unquote

from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.bm25 import LineRanker, with_context

__all__ = ["entry_names", "goal_terms", "mentions", "referred_entries", "term_groups",
           "term_hits"]

_QUOTED = re.compile(
    r"""(?:^|(?<=[\s(\[:]))(?:'([^'\n]{2,60})'|"([^"\n]{2,60})"|`([^`\n]{2,60})`"""
    r"""|\u201c([^\u201d\n]{2,60})\u201d|\u2018([^\u2019\n]{2,60})\u2019)(?=$|[\s.,;:!?)\]])"""
)
_CODE = re.compile(
    r"(?<![\w.-])("
    r"--?[A-Za-z][\w-]*"  # a command-line option
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?"  # a dotted name, maybe called
    r"|[A-Za-z_]\w*\(\)"  # a call
    r"|[A-Za-z]\w*_\w+"  # snake_case
    r"|[a-z]+[A-Z]\w*"  # camelCase
    r")"
)
_NOT_CODE = frozenset({"e.g", "i.e", "etc", "vs"})
_MIN_TERM_CHARS = 3


def goal_terms(goal: str, max_terms: int = 6) -> list[str]:
    """The quoted and code-like terms of ``goal``, in order, each once (a call's ``()``
    dropped: a page names ``open(file, mode='r', …)``, not ``open()``)."""
    found: list[str] = []
    for match in _QUOTED.finditer(goal):
        found.append(next(group for group in match.groups() if group))
    found += [match.group(1) for match in _CODE.finditer(goal)]
    terms: list[str] = []
    for term in found:
        term = term.strip().removesuffix("()")
        if (len(term) >= _MIN_TERM_CHARS and term.lower() not in _NOT_CODE
                and term.lower() not in (t.lower() for t in terms)):
            terms.append(term)
    return terms[:max_terms]


def term_groups(
    tree: LineTree, ranker: LineRanker, terms: Sequence[str], *, per_term: int = 3,
    context: int = 2, lexical: bool = True,
) -> list[tuple[int, ...]]:
    """Line groups (0-based, ± ``context``) for the terms: the best line of each term,
    then the second best of each, and so on, each line once (``lexical``: see
    :func:`term_hits`)."""
    lowered = [line.lower() for line in tree.lines] if terms else []
    ranked = [term_hits(tree, ranker, term, per_term, lowered, lexical=lexical)
              for term in terms]
    seen: set[int] = set()
    groups: list[tuple[int, ...]] = []
    for rank in range(per_term):
        for hits in ranked:
            if rank < len(hits) and hits[rank] not in seen:
                seen.add(hits[rank])
                groups.append(tuple(with_context(hits[rank], len(tree), context)))
    return groups


def term_hits(tree: LineTree, ranker: LineRanker, term: str, k: int,
              lowered: Sequence[str] | None = None, *, lexical: bool = True) -> list[int]:
    """The ``k`` lines a term most likely names, best first.

    An element (a term, heading, field, button) whose name holds the term comes first;
    then a line that links to the term's own anchor (``url='…#asyncio.to_thread'``,
    the entry's address, whatever the link says: a table of contents writes
    ``to_thread()``); then a link whose name holds the term, then plain text. Within
    each, a name that starts with the term comes first, then page order: a
    documentation entry is named ``coroutine asyncio.to_thread(…)``, while the text that
    merely mentions it starts with the term. All of them come before word matches: BM25 scores
    a long entry ``json.dumps(obj, *, skipkeys=False, …)`` below the short links that
    mention it, though the entry is what a reader of the term is after.
    ``lowered``: the page's lines in lower case, when the caller matches several terms.
    ``lexical``: fill up with BM25's hits for the term's words when fewer than ``k``
    names hold it."""
    needle = term.lower()
    lowered = lowered if lowered is not None else [line.lower() for line in tree.lines]
    exact: list[tuple[int, int, int]] = []
    if len(needle) >= 3:
        for index in range(len(tree)):
            if needle not in lowered[index]:
                continue
            line = tree.parsed(index)
            name = (line.name or "").lower()
            fragment = _FRAGMENT.search(lowered[index])
            anchored = fragment is not None and unquote(fragment.group(1)) == needle
            named = needle in name
            if not (anchored or named):
                continue
            role = _role_rank(line.role)
            rank = 0 if named and role == 0 else 1 if anchored else 1 + role
            exact.append((rank, 0 if name.startswith(needle) else 1, index))
    hits = [index for *_, index in sorted(exact)[:k]]
    if not lexical:
        return hits
    for index, _ in ranker.top(term, k + len(hits)):
        if len(hits) >= k:
            break
        if index not in hits:
            hits.append(index)
    return hits


def _role_rank(role: str) -> int:
    if role == "link":
        return 1
    return 2 if role in _TEXT_ROLES or not role else 0


_TEXT_ROLES = frozenset({"StaticText", "generic", "paragraph", "LabelText", "none"})


_ENTRY_ROLES = frozenset({"term", "heading"})
_FRAGMENT = re.compile(r"url='[^'#]*#([^']+)'")


def entry_names(tree: LineTree) -> list[tuple[int, str]]:
    """The page's entries — terms and headings — with their names in lower case."""
    return [(i, (line.name or "").lower()) for i in range(len(tree))
            if tree.roles[i] in _ENTRY_ROLES and (line := tree.parsed(i)).name]


def mentions(tree: LineTree, index: int) -> list[str]:
    """What line ``index`` refers to by name: the fragment of an in-page link
    (``#statistics.stdev``), a link's own name (``stdev()``), and the code-like words
    of its text (``--branch-sim=yes``: ``--branch-sim``)."""
    line = tree.parsed(index)
    found: list[str] = []
    if fragment := _FRAGMENT.search(tree.lines[index]):
        found.append(unquote(fragment.group(1)))
    if line.role == "link" and line.name:
        found.append(line.name)
    found += [m.group(1) for m in _CODE.finditer(line.name or "")]
    tokens = [t.strip().removesuffix("()").split("=")[0].lower() for t in found]
    return list(dict.fromkeys(t for t in tokens if len(t) >= _MIN_TERM_CHARS))


def referred_entries(entries: Sequence[tuple[int, str]], tree: LineTree,
                     indices: Iterable[int], limit: int = 8) -> list[int]:
    """The entries that lines ``indices`` mention, in their order: a term or heading
    whose name starts with a mention (``--branch-sim=no|yes``), or names it as the
    last part of a dotted name (``statistics.stdev(data, …)`` for ``stdev``). The
    mentioning lines are the candidates a goal's words found, often a summary table
    or a sentence of prose, while the element the goal needs is the entry itself."""
    found: list[int] = []
    for index in indices:
        for token in mentions(tree, index):
            dotted = f".{token.rsplit('.', 1)[-1]}("
            for entry, name in entries:
                if entry != index and entry not in found and (
                        name.startswith(token) or dotted in name):
                    found.append(entry)
                    break
            if len(found) >= limit:
                return found
    return found
