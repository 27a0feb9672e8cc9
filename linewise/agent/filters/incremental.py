"""Carrying a selection over to a page that changed little, without a model call.

After a click that changes a few lines (a focus moves, a message appears, a section
opens), asking the retriever model again about the whole candidate set costs a
minute or more with a small local model, and its answer would mostly repeat the last
one. When the agent is not stuck and the page changed little since the model last
chose, the focus filters instead show:

- the previous selection, each line at its new position (lines that changed or went
  are dropped from it);
- the lines that changed, with ``context`` lines either side: what the action did is
  shown whatever it is;
- the lines the goal names and the best lexical hits for the new query (the history
  gained an action);
- the first lines the last action led to (:mod:`.stages.followed`: the section an in-page
  link opened; such a click often changes the tree by no more than a focus mark);

and, with ``items``, the items of the changed lines and of those hits, within the view
budget. The caller adds the recall guard's lines.

"Little" is measured in tokens of changed lines, summed over the steps carried since
the model last chose (:class:`CarryOver`), so the view's growth is bounded as well as
the page's drift from what the model saw. A stuck agent is never served a carried
selection: escalation decides first (:mod:`.retriever.escalation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.stages.candidates import lexical_groups, named_groups
from linewise.agent.filters.stages.page_index import PageIndex
from linewise.agent.filters.view.items import expand_items
from linewise.agent.filters.view.page_diff import PageDiff
from linewise.agent.text.bm25 import with_context
from linewise.tokens import count_tokens_each

__all__ = ["CarriedSelection", "CarryOver", "carried_selection", "changed_tokens"]


def changed_tokens(lines: list[str], diff: PageDiff, limit: int) -> int:
    """Tokens of the changed lines, counted until they pass ``limit`` (a large change
    is not counted to its end: it is too large either way)."""
    total = 0
    for run in diff.changed:
        for count in count_tokens_each(lines[i] + "\n" for i in run):
            total += count
            if total > limit:
                return total
    return total


@dataclass
class CarryOver:
    """How far the page drifted since the model last chose, step by step."""

    steps: int = 0
    """Steps carried over since the model (or escalation) last chose."""
    tokens: int = 0
    """Tokens of the lines that changed over those steps."""

    def select(
        self, page: PageIndex, observation: FilterInput, previous_kept: set[int],
        diff: PageDiff, notes: dict[str, object], *, max_tokens: int, max_steps: int,
        context: int, top_lexical: int, lexical_context: int, items_budget: int | None,
        item_max_lines: int, followed: Sequence[int] = (),
    ) -> set[int] | None:
        """The carried selection when at most ``max_steps`` steps and ``max_tokens`` of
        changed lines (this step's included) separate it from the model's choice; else
        None (the caller asks the model). The decision goes to ``notes``."""
        if self.steps >= max_steps:
            notes["incremental"] = (f"{self.steps} steps carried over in a row: the model "
                                    "chooses again")
            return None
        room = max_tokens - self.tokens
        tokens = changed_tokens(page.lines, diff, room)
        if tokens > room:
            notes["incremental"] = (f"changed too much to carry over: more than {room} "
                                    f"tokens changed ({self.tokens} before; limit {max_tokens})")
            return None
        selection = carried_selection(
            page, observation, previous_kept, diff, context=context, top_lexical=top_lexical,
            lexical_context=lexical_context, items_budget=items_budget,
            item_max_lines=item_max_lines, followed=followed,
        )
        self.steps += 1
        self.tokens += tokens
        notes["incremental"] = "little changed: previous selection carried over"
        notes["carried_over"] = {
            "kept_lines": selection.carried, "changed_lines": len(selection.changed),
            "changed_tokens": tokens, "steps": self.steps, "tokens_since_model": self.tokens,
            "lexical_lines": sorted(i + 1 for i in selection.lexical),
        }
        if selection.items is not None:
            notes["items"] = selection.items
        return selection.lines

    def chosen(self) -> None:
        """A fresh selection was made: the drift starts again from it."""
        self.steps = 0
        self.tokens = 0


@dataclass
class CarriedSelection:
    lines: set[int]
    """0-based lines of the view (before the recall guard's)."""
    carried: int
    """Lines of the previous selection still on the page."""
    changed: list[int]
    """0-based lines that changed, context not included."""
    lexical: list[int]
    items: dict[str, int] | None = None


def carried_selection(
    page: PageIndex, observation: FilterInput, previous_kept: set[int], diff: PageDiff, *,
    context: int, top_lexical: int, lexical_context: int,
    items_budget: int | None = None, item_max_lines: int = 40, followed: Sequence[int] = (),
) -> CarriedSelection:
    """The selection of a little-changed step (see the module's docstring).
    ``items_budget``: the view budget for item expansion, None without items."""
    total = len(page.lines)
    carried = diff.carried(previous_kept)
    changed = diff.changed_lines
    shown_changed = {j for i in changed for j in with_context(i, total, context)}
    groups = [*named_groups(page.tree, page.ranker, observation, context=lexical_context),
              *lexical_groups(page.lines, observation, limit=top_lexical,
                              context=lexical_context, ranker=page.ranker)]
    lexical = [i for group in groups for i in group.lines]
    lines = carried | shown_changed | set(lexical) | set(followed)
    result = CarriedSelection(lines=lines, carried=len(carried), changed=changed,
                              lexical=lexical)
    if items_budget is not None:
        expansion = expand_items(page.tree, lines, [*followed, *changed, *lexical], items_budget,
                                 max_lines=item_max_lines)
        result.lines = expansion.lines
        result.items = {"view_budget_tokens": items_budget, "added": expansion.items_added,
                        "skipped": expansion.items_skipped,
                        "view_tokens": expansion.view_tokens}
    return result
