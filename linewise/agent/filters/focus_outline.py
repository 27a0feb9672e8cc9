"""``focus-outline``: outline first, then zoom in.

Per step, after the same candidate stages as ``focus`` (:mod:`.stages.candidates`):

1. the retriever model reads a compact outline of the whole page — headings, landmarks,
   forms and their fields, and the page's items (articles, rows, list items, terms),
   each reduced to its line number, role and a short name or summary — fitted to the
   same token budget as ``focus`` (entries by the outline's priority, then items), and
   picks the entries whose part of the page the next action needs;
2. zoom in, by ``zoom``:

   - ``candidates`` (one model call): the chosen entries with their items or
     sections, then the candidate lines that fall inside the chosen parts, each with
     its item (:func:`.view.items.expand_items`);
   - ``model`` (two calls): the lines of the chosen parts, nearest to the chosen
     entries first, fitted to the budget, are shown to the model, which picks lines as
     in ``focus``; the chosen lines are then expanded to their items.

   Either way, the other candidates (in the order the stages proposed them, with their
   items) then fill what is left of the view budget: the model orders the view, the
   budget bounds it.

Both calls' inputs are bounded by ``budget_tokens`` whatever the page's size. An
unusable first answer leaves the ``focus-candidates-items`` view (the candidates in the
order the stages proposed them, with their items), recorded in
``notes["candidates_fallback"]``. Escalation, the recall guard, the best lexical hits
and the incremental reuse are those of :class:`.focus.FocusFilter`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.focus import FocusConfig, FocusFilter, _Prompt, within_budget
from linewise.agent.filters.retriever.recall_guard import guard_lines
from linewise.agent.filters.stages.budget import MARKER_TOKENS
from linewise.agent.filters.stages.groups import CandidateSet
from linewise.agent.filters.view.items import ITEM_ROLES, expand_items, line_roles, section_of
from linewise.agent.filters.view.outline import OutlineEntry, by_priority, outline_entries
from linewise.agent.filters.view.render import render_with_markers
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.models import ChatModel
from linewise.agent.text.embedders import Embedder
from linewise.records import LLMCall
from linewise.tokens import count_message_tokens, count_tokens

__all__ = ["OutlineFirstFilter", "ZoomMode", "entry_label", "outline_for_model"]

ZoomMode = Literal["candidates", "model"]

_SUMMARY_CHARS = 60
_PART_KINDS = frozenset({"search", "dialog", "heading", "landmark"})
# Items with names or summaries longer than this are cut: the outline must stay compact.


def outline_for_model(tree: LineTree, roles: list[str] | None = None,
                      entries: Sequence[OutlineEntry] | None = None) -> list[int]:
    """The outline entries the model may pick, in the order they get room: the parts
    a page is made of first (search, dialogs, headings, landmarks), then its items
    (articles, rows, list items: what a model picks a part by), then the outline's
    other kinds (fields and buttons, table headers, tabs, terms last)."""
    role = roles if roles is not None else line_roles(tree)
    ranked = by_priority(entries if entries is not None else outline_entries(tree.lines))
    parts = [e.index for e in ranked if e.kind in _PART_KINDS]
    rest = [e.index for e in ranked if e.kind not in _PART_KINDS]
    taken = set(parts) | set(rest)
    items = [i for i in range(len(tree)) if role[i] in ITEM_ROLES and i not in taken]
    return [*parts, *items, *rest]


def entry_label(tree: LineTree, index: int) -> str:
    """An outline entry as the model sees it: indentation, bid, role and a short name;
    an item without a name is summarised by the first names in its subtree."""
    line = tree.parsed(index)
    head = line.head(_SUMMARY_CHARS)
    if line.name:
        return "\t" * line.depth + head
    words: list[str] = []
    for child in range(index + 1, min(tree.subtree_end[index], index + 30)):
        name = tree.parsed(child).name
        if name and name not in words:
            words.append(name)
        if sum(len(w) + 3 for w in words) > _SUMMARY_CHARS:
            break
    summary = " | ".join(words)
    if len(summary) > _SUMMARY_CHARS:
        summary = summary[: _SUMMARY_CHARS - 1].rstrip() + "…"
    return "\t" * line.depth + (f"{head}: {summary}" if summary else head)


class OutlineFirstFilter(FocusFilter):
    """Outline first, then zoom in. One instance per episode."""

    def __init__(
        self, model: ChatModel, config: FocusConfig | None = None,
        embedder: Embedder | None = None, *, zoom: ZoomMode = "candidates",
        name: str = "focus-outline",
    ) -> None:
        super().__init__(model, config, embedder, name=name)
        self.zoom = zoom

    async def _choose(
        self, observation: FilterInput, tree: LineTree, candidates: CandidateSet,
        notes: dict[str, object],
    ) -> tuple[set[int], list[LLMCall]]:
        roles = line_roles(tree)
        self.user_prompt = "focus_outline_user.md"
        prompt = self._outline_prompt(observation, tree, roles)
        notes["retriever_input_tokens"] = [prompt.tokens]
        notes["outline_lines"] = prompt.outline_lines
        chosen, calls, error = await self._ask(observation, prompt)
        if chosen is None:
            notes["candidates_fallback"] = error
            return self._expanded(observation, tree, candidates, [], notes), calls
        entries = sorted(chosen)
        notes["outline_choice"] = [i + 1 for i in entries]
        parts = [section_of(tree, i, roles) for i in entries]
        inside = {i for part in parts for i in part}
        if self.zoom == "candidates":
            seeds = [*entries, *(i for i in candidates.order if i in inside)]
            return self._expanded(observation, tree, candidates, seeds, notes), calls
        self.user_prompt = "focus_user.md"
        zoom_prompt = self._zoom_prompt(observation, tree, entries, parts)
        notes["retriever_input_tokens"] = [prompt.tokens, zoom_prompt.tokens]
        picked, more, error = await self._ask(observation, zoom_prompt)
        calls.extend(more)
        if picked is None:
            notes["zoom_fallback"] = error
            seeds = [*entries, *(i for i in candidates.order if i in inside)]
            return self._expanded(observation, tree, candidates, seeds, notes), calls
        notes["model_lines"] = sorted(i + 1 for i in picked)
        return self._expanded(observation, tree, candidates, [*sorted(picked), *entries],
                              notes), calls

    def _expanded(self, observation: FilterInput, tree: LineTree, candidates: CandidateSet,
                  seeds: list[int], notes: dict[str, object]) -> set[int]:
        """The seeds with their items, then the best lexical hits and the other candidates,
        within the view budget."""
        budget = min(self.config.view_budget_tokens,
                     int(self.config.view_max_share * observation.full_tokens))
        base = guard_lines(tree, observation) | set(candidates.top_lexical)
        # what the model chose comes first; the other candidates, in the order the stages
        # proposed them, fill what is left of the view budget
        expansion = expand_items(
            tree, base, [*seeds, *candidates.top_lexical, *candidates.order], budget,
            max_lines=self.config.item_max_lines,
        )
        notes["items"] = {"view_budget_tokens": budget, "added": expansion.items_added,
                          "skipped": expansion.items_skipped,
                          "view_tokens": expansion.view_tokens}
        return expansion.lines

    # -- prompts

    def _outline_prompt(self, observation: FilterInput, tree: LineTree,
                        roles: list[str]) -> _Prompt:
        """As many outline entries as fit in the budget, drawn in page order."""
        room = self._observation_room(observation, self.config.budget_tokens)
        used = 0
        chosen: list[int] = []
        for index in outline_for_model(tree, roles, self._page_of(tree.lines).outline):
            cost = count_tokens(f"{index + 1}|{entry_label(tree, index)}\n") + MARKER_TOKENS
            if used + cost > room:
                break
            chosen.append(index)
            used += cost
        return within_budget(lambda kept: self._draw(observation, tree, kept, labels=True),
                             chosen, self.config.budget_tokens)

    def _zoom_prompt(self, observation: FilterInput, tree: LineTree, entries: list[int],
                     parts: list[range]) -> _Prompt:
        """The lines of the chosen parts, nearest to their entries first, in turns across
        the parts, fitted to the budget."""
        room = self._observation_room(observation, self.config.budget_tokens)
        used = 0
        shown: list[int] = []
        taken: set[int] = set()
        cursors = [iter(part) for part in parts]
        while cursors:
            for cursor in list(cursors):
                index = next(cursor, None)
                if index is None:
                    cursors.remove(cursor)
                    continue
                if index in taken:
                    continue
                cost = count_tokens(f"{index + 1}|{tree.lines[index]}\n")
                if used + cost > room:
                    cursors.remove(cursor)
                    continue
                shown.append(index)
                taken.add(index)
                used += cost
        return within_budget(lambda kept: self._draw(observation, tree, kept, labels=False),
                             shown, self.config.budget_tokens)

    def _draw(self, observation: FilterInput, tree: LineTree, indices: list[int], *,
              labels: bool) -> _Prompt:
        shown = set(indices)

        def show(index: int, line: str) -> str:
            return f"{index + 1}|{entry_label(tree, index) if labels else line}"

        numbered = render_with_markers(tree.lines, (i + 1 for i in shown), show)
        messages: list[dict[str, Any]] = self._messages(observation, numbered)
        return _Prompt(numbered=numbered, messages=messages, shown=shown,
                       tokens=count_message_tokens(messages),
                       outline_lines=len(indices) if labels else 0)
