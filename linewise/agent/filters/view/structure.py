"""The structure-preserving view: kept lines inside the skeleton of their ancestors.

Given the lines a retriever kept, the view shows each of them (without its state:
``shown_line``), every ancestor that gives it context (a long one reduced to bid, role
and a shortened name) at its original indentation, the title of the plain-text section
it is in (``LineTree.text_titles``: a release's header in a NEWS file), and, under
each shown node, one counted marker per run of dropped siblings. The result is a valid,
smaller tree: it cuts lines, not only text (the public implementation keeps one line per
dropped node, which saves little).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from linewise.agent.filters.view.render import omission_marker
from linewise.agent.filters.view.tree import LineTree
from linewise.axtree import line_depth, without_state


class StructuredView(BaseModel):
    text: str
    kept_lines: list[int]
    """1-based numbers of the lines copied unchanged."""
    context_lines: list[int]
    """1-based numbers of the ancestor lines shown shortened."""
    markers: int
    omitted_lines: int


def marker_line(depth: int, count: int) -> str:
    """The marker for ``count`` dropped lines at indentation level ``depth``."""
    return omission_marker(count, "\t" * depth)


SHORT_LINE = 60
"""Characters (indentation aside) up to which a context line is shown whole."""


def shown_line(tree: LineTree, index: int, *, context: bool) -> str:
    """How line ``index`` reads in a view: without its state (``without_state``); as
    context, shortened to bid, role and name unless it is short already. A short line
    reads the same whether it is context or kept: an element that turns from one to the
    other (the one the agent just acted on) leaves the view's text, and the prompt cache
    behind it, unchanged."""
    line = without_state(tree.lines[index])
    if context and len(line) - line_depth(line) > SHORT_LINE:
        return tree.short_head(index)
    return line


def rebuild_with_structure(tree: LineTree, kept: Iterable[int]) -> StructuredView:
    """Build the view for the kept lines (0-based indices into ``tree.lines``)."""
    kept_set = {i for i in kept if 0 <= i < len(tree)}
    context: set[int] = set()
    for index in kept_set:
        for ancestor in tree.ancestors(index):
            if ancestor in kept_set or ancestor in context:
                break  # the rest of the chain is already shown
            context.add(ancestor)
    if any(title >= 0 for title in tree.text_titles):
        context |= {tree.text_titles[i] for i in kept_set} - kept_set - {-1}
    shown = kept_set | context

    out: list[str] = []
    markers = omitted = 0
    pending = 0  # lines of the current run of dropped siblings
    pending_depth = 0
    pending_parent = -2
    i = 0
    n = len(tree)
    while i < n:
        if i in shown:
            if pending:
                out.append(marker_line(pending_depth, pending))
                markers += 1
                omitted += pending
                pending = 0
            out.append(shown_line(tree, i, context=i not in kept_set))
            i += 1
            continue
        # i roots a dropped subtree (its parent is shown, or it is top-level)
        parent = tree.parent[i]
        if pending and parent != pending_parent:
            out.append(marker_line(pending_depth, pending))
            markers += 1
            omitted += pending
            pending = 0
        if not pending:
            pending_parent = parent
            pending_depth = tree.depth[i]
        size = tree.subtree_end[i] - i
        pending += size
        i += size
    if pending:
        out.append(marker_line(pending_depth, pending))
        markers += 1
        omitted += pending
    return StructuredView(
        text="\n".join(out),
        kept_lines=sorted(k + 1 for k in kept_set),
        context_lines=sorted(c + 1 for c in context),
        markers=markers,
        omitted_lines=omitted,
    )
