"""Budget sharing: every stage's best candidates keep a place in the view.

Without a retriever model the view is built by item expansion (:mod:`..view.items`): the
candidates' items are added in the order the stages' turns took them until the view
budget is full. A long item early in that order (a section of 40 lines) can then push
out a later stage's best hit whole — the term a passage matched, the field the outline
found — although its own line would have cost a few tokens. A new stage makes it worse:
its groups take turns too, so another stage's needed group moves later.

:func:`reserved_lines` sets a share of the view budget aside for the candidates' own
lines, taken round-robin across the stages, each stage's best group first: every stage
that proposed something keeps its best groups' lines in the view, whatever the items of
the others cost. Items then fill what is left of the budget, in the usual order.
"""

from __future__ import annotations

from collections.abc import Sequence

from linewise.agent.filters.stages.groups import Group
from linewise.agent.filters.view.tree import LineTree
from linewise.tokens import count_tokens_each

__all__ = ["reserved_lines"]

_MARKER_TOKENS = 10
"""What one ``… N lines omitted …`` marker in the view costs, about."""


def reserved_lines(
    tree: LineTree, groups: Sequence[Group], budget_tokens: int, *,
    skip_stages: frozenset[str] = frozenset({"guard"}),
) -> set[int]:
    """The lines of the candidates' groups, round-robin across stages (each stage's
    first group, then each one's second…), while their tokens (lines, shortened
    ancestors, one marker per run) stay within ``budget_tokens``. A group that does not
    fit is skipped; later, smaller ones may still fit."""
    queues: dict[str, list[Group]] = {}
    for group in groups:
        if group.stage not in skip_stages:
            queues.setdefault(group.stage, []).append(group)
    wanted = {i for group in groups for i in group.lines}
    sizes = dict(zip(sorted(wanted), count_tokens_each(
        tree.lines[i] + "\n" for i in sorted(wanted)), strict=True))
    kept: set[int] = set()
    ancestors: set[int] = set()
    used = 0
    depth = max((len(q) for q in queues.values()), default=0)
    for rank in range(depth):
        for queue in queues.values():
            if rank >= len(queue):
                continue
            new = [i for i in queue[rank].lines if i not in kept]
            if not new:
                continue
            new_set = set(new)
            up = {a for i in new for a in tree.ancestors(i)} - kept - ancestors - new_set
            runs = sum(1 for i in new if i - 1 not in new_set and i - 1 not in kept)
            # an ancestor is drawn shortened: about a third of a line
            cost = (sum(sizes[i] for i in new) + 4 * len(up) + _MARKER_TOKENS * runs)
            if used + cost > budget_tokens:
                continue
            kept.update(new)
            ancestors.update(up)
            used += cost
    return kept
