"""The focus stages' groups taken into a token budget, stage by stage in turns, so the
candidates of a 20,000-line page cost what those of a 2,000-line page cost."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from linewise.agent.filters.stages.catalog import ALWAYS, FOCUS_STAGES
from linewise.agent.filters.stages.groups import CandidateSet, Group
from linewise.tokens import count_tokens_each

__all__ = ["MARKER_TOKENS", "fill_budget", "numbered_sizes"]

MARKER_TOKENS = 10
"""What one ``… N lines omitted …`` marker between runs of lines costs, about."""


def numbered_sizes(lines: Sequence[str], indices: Iterable[int]) -> dict[int, int]:
    """Tokens of ``{n}|{line}\\n`` for each 0-based index, as the retriever sees it."""
    wanted = sorted(set(indices))
    counts = count_tokens_each(f"{i + 1}|{lines[i]}\n" for i in wanted)
    return dict(zip(wanted, counts, strict=True))


def fill_budget(
    groups: Mapping[str, Sequence[Group]], sizes: Mapping[int, int], budget: int,
    *, top_lexical: int = 3,
) -> CandidateSet:
    """Take the guard's groups, then the stages' groups in turns (each stage's
    ``turns`` groups per turn, in the order of :data:`.catalog.FOCUS_STAGES`) while they
    fit in ``budget`` tokens; a group that does not fit is skipped. The first
    ``top_lexical`` groups taken of each ``top`` stage are kept whatever the model says."""
    taken = CandidateSet()

    def take(group: Group, force: bool = False) -> bool:
        new = [i for i in group.lines if i not in taken.lines]
        # a run not touching taken lines costs one omission marker more in the prompt
        runs = sum(1 for i in new if i - 1 not in taken.lines and i - 1 not in new)
        cost = sum(sizes[i] for i in new) + MARKER_TOKENS * runs
        if not force and taken.tokens + cost > budget:
            return False
        taken.lines.update(new)
        taken.order.extend(new)
        taken.groups.append(group)
        taken.tokens += cost
        if new:
            taken.by_stage.setdefault(group.stage, []).extend(i + 1 for i in new)
        return True

    for group in groups.get(ALWAYS, ()):
        take(group, force=True)
    turns_of = {stage.name: stage.turns for stage in FOCUS_STAGES if stage.turns}
    cursors = dict.fromkeys(turns_of, 0)
    top_taken = {stage.name: 0 for stage in FOCUS_STAGES if stage.top}
    while any(cursors[s] < len(groups.get(s, ())) for s in turns_of):
        for stage, turns in turns_of.items():
            pending = groups.get(stage, ())
            added = 0
            while added < turns and cursors[stage] < len(pending):
                group = pending[cursors[stage]]
                cursors[stage] += 1
                if take(group):
                    added += 1
                    if stage in top_taken and top_taken[stage] < top_lexical:
                        top_taken[stage] += 1
                        taken.top_lexical.extend(group.lines)
    for numbers in taken.by_stage.values():
        numbers.sort()
    return taken
