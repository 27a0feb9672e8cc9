"""Defender mode of the retriever filters: drop page text that addresses the agent.

After FocusAgent's defender: the retriever is told that the page is untrusted, keeps
what serves the goal and names, in an ``injections`` field (JSON) or an
``<injections>`` block (tags), the lines it dropped because they try to instruct the
agent. Those lines, and everything inside them, are removed from the view whatever
else would bring them back (the padding around chosen ranges, the recall guard, a
whole-tree fallback or escalation): the texts of lines once named stay out for the rest
of the episode.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from typing import Any

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.agent.filters.view.ranges import Range, lines_of, merge_ranges, parse_ranges
from linewise.agent.filters.view.render import render_with_markers
from linewise.agent.filters.view.structure import rebuild_with_structure
from linewise.agent.filters.view.tree import LineTree
from linewise.errors import RangeParseError
from linewise.prompts import render_prompt
from linewise.tokens import count_tokens

_TAG = re.compile(r"<injections>(.*?)(?:</injections>|\Z)", re.DOTALL | re.IGNORECASE)


def defend_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (the ranges answer) with an optional ``injections`` list of ranges."""
    extended = copy.deepcopy(schema)
    extended["properties"]["injections"] = copy.deepcopy(schema["properties"]["ranges"])
    return extended


def defend_system(system: str) -> str:
    """The retriever's system prompt with the defender's instructions."""
    return f"{system.rstrip()}\n\n{render_prompt('retriever_defend.md').strip()}\n"


def defend_answer_format(use_schema: bool) -> str:
    return render_prompt(
        "retriever_answer_defend_json.md" if use_schema else "retriever_answer_defend_tags.md"
    )


def injection_ranges(answer: str, n_lines: int) -> list[Range]:
    """The ranges the answer names as text addressing the agent; [] when it names none
    or they cannot be read (an unreadable list drops nothing: the ranges decide)."""
    body: str | None = None
    start = answer.find("{")
    if start >= 0:
        try:
            value = json.loads(answer[start:answer.rfind("}") + 1])
        except ValueError:
            value = None
        if isinstance(value, dict) and "injections" in value:
            body = json.dumps(value["injections"])
    if body is None:
        match = _TAG.search(answer)
        body = match.group(1) if match else None
    if body is None or not body.strip() or body.strip() in ("[]", "()", "none"):
        return []
    try:
        return parse_ranges(f"<answer>{body}</answer>", n_lines)
    except RangeParseError:
        return []


class InjectionMemory:
    """The texts of lines named as injections during one episode."""

    def __init__(self) -> None:
        self.texts: set[str] = set()
        self.named: list[Range] = []

    def remember(self, lines: list[str], ranges: Iterable[Range]) -> list[Range]:
        merged = merge_ranges(ranges)
        for n in lines_of(merged):
            if 1 <= n <= len(lines):
                self.texts.add(lines[n - 1].strip())
        return merged

    def injected(self, lines: list[str]) -> set[int]:
        """0-based lines whose text was named as an injection."""
        if not self.texts:
            return set()
        return {i for i, line in enumerate(lines) if line.strip() in self.texts}


def without_injections(
    observation: FilterInput, result: FilterResult, memory: InjectionMemory,
    named: list[Range], *, structure: bool,
) -> FilterResult:
    """``result`` without the lines named as injections (this step or before), with
    ``notes["defend"]``: what this step's answer named and which lines were dropped."""
    lines = observation.lines
    tree = LineTree(lines)
    # A named container (a dialog, a post) is the injection with everything inside it;
    # kept as an ancestor, its name would reach the model as a context line anyway.
    named_lines = {j for i in memory.injected(lines) for j in range(i, tree.subtree_end[i])}
    dropped = named_lines & {k - 1 for k in result.kept_lines}
    notes = {**result.notes, "defend": {
        "on": True, "injections": [list(r) for r in named],
        "dropped_lines": sorted(i + 1 for i in dropped),
    }}
    if not dropped:
        return result.model_copy(update={"notes": notes})
    kept = {k - 1 for k in result.kept_lines} - dropped
    context_lines: list[int] = []
    if structure:
        view = rebuild_with_structure(tree, kept)
        text, context_lines = view.text, view.context_lines
    else:
        text = render_with_markers(lines, sorted(k + 1 for k in kept))
    return result.model_copy(update={
        "text": text, "kept_lines": sorted(k + 1 for k in kept),
        "context_lines": context_lines,
        "shown_bids": observation.bids_on([*(k + 1 for k in kept), *context_lines]),
        "tokens_shown": count_tokens(text), "notes": notes,
        "tokens_full_view": observation.stateless_tokens if structure else None,
    })
