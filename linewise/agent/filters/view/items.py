"""Item expansion: a kept line brings the item it belongs to, whole, within a view budget.

A retriever (model or candidate stage) often recognises the *thing* a goal is about —
the product's title, the post's author, the row's name, the option's description —
and keeps that line, while the element the next action needs sits a few lines away in
the same item: the product's "Add to cart" button, the post's "Quote" button, the
row's "Edit" link, the ``term`` line above a matching description. This module finds,
for a line, its enclosing item:

- the nearest ancestor (or the line itself) whose role makes it an item: article, row,
  listitem, treeitem, dialog, form group (``group``, ``radiogroup``, ``form``), figure,
  tab panel;
- a ``term`` / ``definition`` pair of a description list, taken together (a line in
  the definition brings its term, a term brings its definition);
- failing those, the section of the nearest heading before it (the heading up to the
  next heading under the same parent).

An item longer than ``max_lines`` is not taken whole: its head (the item line, the
term of a pair, or the heading) and its controls nearest to the line are taken
instead, so an item can never swallow the view.

:func:`expand_items` adds the items of seed lines, in the seeds' order (most important
first), while the structure-preserving view stays within a token budget; what did not
fit is left out and counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from linewise.agent.filters.view.structure import rebuild_with_structure
from linewise.agent.filters.view.tree import LineTree
from linewise.tokens import count_tokens, count_tokens_each

__all__ = ["ITEM_ROLES", "ItemExpansion", "enclosing_item", "expand_items", "line_roles",
           "section_of"]

ITEM_ROLES = frozenset({
    "article", "row", "listitem", "treeitem", "dialog", "alertdialog", "group",
    "radiogroup", "form", "figure", "tabpanel",
})
"""Roles whose subtree is one item a user acts on as a whole."""

_PAIR_ROLES = frozenset({"term", "definition"})

# Controls an oversized item keeps near the line: what an action can use.
_CONTROL_ROLES = frozenset({
    "button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox",
    "menuitem", "switch", "slider", "spinbutton", "tab",
})

# How many preceding siblings are searched for a heading, per level: bounds the work on
# pages whose sections hold thousands of flat lines.
_HEADING_LOOKBACK = 60

_MARKER_TOKENS = 10
"""What one ``… N lines omitted …`` marker costs, about; a new run of lines may add two
(before and after it)."""


@dataclass
class ItemExpansion:
    lines: set[int] = field(default_factory=set)
    """0-based lines of the view: the base lines and the items added."""
    items_added: int = 0
    items_skipped: int = 0
    """Items left out because the view budget was full."""
    view_tokens: int = 0


def line_roles(tree: LineTree) -> list[str]:
    """The role of each line, read once per tree for the functions below."""
    return tree.roles


def enclosing_item(tree: LineTree, index: int, max_lines: int = 40,
                   roles: Sequence[str] | None = None) -> list[int]:
    """0-based lines of the item around ``index`` (always including ``index``)."""
    role = roles if roles is not None else line_roles(tree)
    for node in [index, *tree.ancestors(index)]:
        if role[node] in _PAIR_ROLES:
            return _pair(tree, role, node, index, max_lines)
        if role[node] in ITEM_ROLES:
            span = range(node, tree.subtree_end[node])
            if len(span) <= max_lines:
                return list(span)
            return _capped(tree, role, [node], span, index, max_lines)
    return _section(tree, role, index, max_lines)


def section_of(tree: LineTree, index: int, roles: Sequence[str] | None = None) -> range:
    """The part of the page an outline entry stands for, whole: a heading's section, an
    item (or term and definition), else the entry's own subtree (a landmark, a form)."""
    role = roles if roles is not None else line_roles(tree)
    if role[index] == "heading" or role[index] in ITEM_ROLES or role[index] in _PAIR_ROLES:
        members = enclosing_item(tree, index, len(tree), role)
        return range(members[0], members[-1] + 1)
    return range(index, tree.subtree_end[index])


def _pair(tree: LineTree, role: Sequence[str], node: int, index: int,
          max_lines: int) -> list[int]:
    """The term(s) and definition around ``node`` (a term or a definition line)."""
    parent = tree.parent[node]
    siblings = tree.children(parent) if parent >= 0 else [
        i for i in range(len(tree)) if tree.parent[i] == -1
    ]
    at = siblings.index(node)
    start = at
    while start > 0 and role[siblings[start]] == "definition":
        start -= 1
    while start > 0 and role[siblings[start - 1]] == "term":
        start -= 1  # several terms may share one definition
    stop = at + 1
    while stop < len(siblings) and role[siblings[stop]] == "definition":
        stop += 1
    if role[siblings[at]] == "term":
        while stop < len(siblings) and role[siblings[stop]] in _PAIR_ROLES:
            if role[siblings[stop]] == "term" and role[siblings[stop - 1]] == "definition":
                break
            stop += 1
    members = siblings[start:stop]
    span = range(members[0], tree.subtree_end[members[-1]])
    if len(span) <= max_lines:
        return list(span)
    heads = [m for m in members if role[m] == "term"] or [members[0]]
    return _capped(tree, role, heads, span, index, max_lines)


def _capped(tree: LineTree, role: Sequence[str], heads: Sequence[int], span: range,
            index: int, max_lines: int) -> list[int]:
    """An oversized item: its head lines (a term with the first lines of its subtree),
    the line itself, then the item's controls nearest to the line."""
    taken: list[int] = [index]
    for head in heads:
        end = min(tree.subtree_end[head], head + 1 + 3)
        taken.extend(i for i in range(head, end) if i not in taken)
    controls = sorted((i for i in span if role[i] in _CONTROL_ROLES and i not in taken),
                      key=lambda i: abs(i - index))
    room = max(0, max_lines - len(taken))
    taken.extend(controls[:room])
    return sorted(taken)


def _section(tree: LineTree, role: Sequence[str], index: int, max_lines: int) -> list[int]:
    """The nearest heading before ``index`` (a preceding sibling of it or of one of its
    ancestors) and its section, up to the next heading under the same parent."""
    heading = -1
    for node in [index, *tree.ancestors(index)]:
        if role[node] == "heading":
            heading = node
            break
        parent = tree.parent[node]
        sibling = _previous_sibling(tree, node, parent)
        looked = 0
        while sibling > parent and looked < _HEADING_LOOKBACK:
            looked += 1
            if role[sibling] == "heading":
                heading = sibling
                break
            sibling = _previous_sibling(tree, sibling, parent)
        if heading >= 0:
            break
    if heading < 0:
        return [index]
    parent = tree.parent[heading]
    end = tree.subtree_end[parent] if parent >= 0 else len(tree)
    stop = tree.subtree_end[heading]
    while stop < end:
        if tree.parent[stop] == parent and role[stop] == "heading":
            break
        stop = tree.subtree_end[stop]
    span = range(heading, stop)
    if len(span) <= max_lines:
        return list(span)
    return _capped(tree, role, [heading], span, index, max_lines)


def _previous_sibling(tree: LineTree, index: int, parent: int) -> int:
    """The line before ``index`` that is a child of ``parent`` (or ``parent`` itself)."""
    previous = index - 1
    while previous > parent and tree.parent[previous] != parent:
        previous = tree.parent[previous]
    return previous


def expand_items(
    tree: LineTree, base: Iterable[int], seeds: Sequence[int], budget_tokens: int,
    *, max_lines: int = 40,
) -> ItemExpansion:
    """``base`` plus the items of ``seeds`` (taken in order) while the structure-preserving
    view of the result stays within ``budget_tokens``.

    An item's cost is estimated as the view draws it: its lines, the ancestors it brings
    (shortened) and a marker per new run of lines. The view is then drawn and measured,
    and the last items added are dropped until it fits.
    """
    roles = line_roles(tree)
    result = ItemExpansion(lines=set(base))
    added: list[list[int]] = []
    lines = tree.lines
    full: dict[int, int] = {}
    short: dict[int, int] = {}

    def tokens_of(indices: Sequence[int], cache: dict[int, int], shortened: bool) -> int:
        missing = [i for i in indices if i not in cache]
        if missing:
            texts = [(tree.short_head(i) if shortened else lines[i]) + "\n" for i in missing]
            cache.update(zip(missing, count_tokens_each(texts), strict=True))
        return sum(cache[i] for i in indices)

    context: set[int] = set()
    for index in result.lines:
        context.update(tree.ancestors(index))
    estimate = count_tokens(rebuild_with_structure(tree, result.lines).text)
    seen_items: set[tuple[int, int]] = set()
    for seed in seeds:
        if not 0 <= seed < len(tree):
            continue
        item = enclosing_item(tree, seed, max_lines, roles)
        key = (item[0], item[-1])
        if key in seen_items:
            continue
        seen_items.add(key)
        new = [i for i in item if i not in result.lines]
        if not new:
            continue
        new_set = set(new)
        ancestors: set[int] = set()
        for index in new:
            for ancestor in tree.ancestors(index):
                if ancestor in result.lines or ancestor in context or ancestor in ancestors:
                    break
                ancestors.add(ancestor)
        ancestors -= new_set
        runs = sum(1 for i in new if i - 1 not in new_set)
        extra = (tokens_of(new, full, False) + tokens_of(sorted(ancestors), short, True)
                 + _MARKER_TOKENS * 2 * runs)
        if estimate + extra > budget_tokens:
            result.items_skipped += 1
            continue
        result.lines.update(new)
        context.update(ancestors)
        added.append(new)
        estimate += extra
    view_tokens = count_tokens(rebuild_with_structure(tree, result.lines).text)
    while view_tokens > budget_tokens and added:
        # the estimate missed (tokens merging across lines, markers shared): drop the
        # last item added (the least important) until the view fits
        result.lines.difference_update(added.pop())
        result.items_skipped += 1
        view_tokens = count_tokens(rebuild_with_structure(tree, result.lines).text)
    result.items_added = len(added)
    result.view_tokens = view_tokens
    return result
