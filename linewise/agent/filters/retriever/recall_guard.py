"""The recall guard: lines kept whatever the retriever says.

The focused element, the elements the last actions named and the element the last
action failed on (``FilterInput.must_keep_bids``, given by the loop) are always shown,
with a few lines of their subtree (the label or the options that say what they are).
A retriever that drops them would leave the action model unable to see what it just did.
"""

from __future__ import annotations

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.view.tree import LineTree


def guarded_bids(observation: FilterInput) -> list[str]:
    """The bids the guard protects for this step, in a stable order."""
    bids = [observation.focused_bid, *observation.must_keep_bids]
    return list(dict.fromkeys(b for b in bids if b))


def guard_lines(tree: LineTree, observation: FilterInput, subtree_lines: int = 3) -> set[int]:
    """0-based lines of the guarded elements and the first lines of their subtrees."""
    keep: set[int] = set()
    for bid in guarded_bids(observation):
        index = tree.bid_line.get(bid)
        if index is None:
            continue
        end = min(tree.subtree_end[index], index + 1 + subtree_lines)
        keep.update(range(index, end))
    return keep
