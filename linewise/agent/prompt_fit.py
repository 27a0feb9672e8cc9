"""Fitting the page into the action model's context: the last resort that makes every
request fit, whatever the page's size and the filter.

The room for the page is what the model's context leaves once the rest of the prompt
(system, goal, history, errors) and the answer are counted, with a margin for the
difference between linewise's token counts (tiktoken) and the model's own tokenizer: on
AXTree text Qwen's tokenizer counted 11% more tokens than tiktoken (66,689 against
60,059 on git-log.html), so a prompt fitted by our count alone could still overflow.

A view over the room is cut at the bottom, in page order, with one marker line saying
how much was left out; what the model was shown is what the trace records.
"""

from __future__ import annotations

from dataclasses import dataclass

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.axtree import bid_of
from linewise.tokens import count_tokens

TOKENIZER_MARGIN = 1.2
"""Our count times this is taken as the model's: tokenizers differ (see the module)."""

REASK_TOKENS = 200
"""The re-ask message that follows a malformed or futile answer (its answer is counted
as one more answer)."""

MIN_ROOM_TOKENS = 200


@dataclass(frozen=True)
class PromptLimits:
    """What an action prompt must fit in."""

    context_tokens: int
    answer_tokens: int

    def view_room(self, prompt_tokens_without_view: int) -> int:
        """Tokens (our count) the page may take in a prompt whose other parts take
        ``prompt_tokens_without_view``: the context less one answer, one re-ask and its
        answer, with the tokenizer margin on everything sent."""
        sendable = self.context_tokens - 2 * self.answer_tokens - REASK_TOKENS
        room = int(sendable / TOKENIZER_MARGIN) - prompt_tokens_without_view
        return max(MIN_ROOM_TOKENS, room)


def cut_marker(lines: int, tokens: int, room: int) -> str:
    return (f"... ({lines} more lines, about {tokens} tokens, not shown: the page is larger "
            f"than the model's context leaves room for ({room} tokens))")


def fit_view(observation: FilterInput, result: FilterResult, room: int) -> FilterResult:
    """``result`` if its view fits ``room`` tokens; else its view cut at the bottom to fit,
    with a marker, and its kept lines and bids narrowed to what is still shown
    (``notes["context_fit"]`` says what was cut)."""
    if result.tokens_shown <= room:
        return result
    view = result.text.split("\n")
    sizes = [count_tokens(line) + 1 for line in view]
    kept_count = _prefix_within(sizes, room - 60)
    text = "\n".join(view[:kept_count])
    while kept_count and count_tokens(text) > room - 60:  # tokens merging across lines
        kept_count = kept_count * 9 // 10
        text = "\n".join(view[:kept_count])
    dropped = view[kept_count:]
    text += ("\n" if text else "") + cut_marker(len(dropped), sum(sizes[kept_count:]), room)
    still = set(_still_shown(observation, result, view[:kept_count]))
    bids = {bid for line in view[:kept_count] if (bid := bid_of(line.strip()))}
    notes = {**result.notes, "context_fit": {
        "room_tokens": room, "tokens_before": result.tokens_shown,
        "view_lines_cut": len(dropped),
    }}
    return result.model_copy(update={
        "text": text,
        "kept_lines": [n for n in result.kept_lines if n in still],
        "context_lines": [n for n in result.context_lines if n in still],
        "shown_bids": [bid for bid in result.shown_bids if bid in bids],
        "tokens_shown": count_tokens(text),
        "notes": notes,
    })


def _still_shown(observation: FilterInput, result: FilterResult,
                 view: list[str]) -> list[int]:
    """The original lines (1-based) among the view's first lines: the view shows its
    lines in page order, each as it is or shortened with its bid (context lines), with
    marker lines between runs, so one walk pairs them."""
    shown = sorted({*result.kept_lines, *result.context_lines})
    found: list[int] = []
    position = 0
    for line in view:
        if position >= len(shown):
            break
        original = observation.lines[shown[position] - 1]
        bid = bid_of(original.strip())
        if line == original or (bid and bid_of(line.strip()) == bid):
            found.append(shown[position])
            position += 1
    return found


def _prefix_within(sizes: list[int], room: int) -> int:
    total = 0
    for count, size in enumerate(sizes):
        if total + size > room:
            return count
        total += size
    return len(sizes)
