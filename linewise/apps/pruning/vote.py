"""Majority vote over repeated graph builds (paper Appendix B.3).

One LLM-built graph can be wrong; the necessary-action set is accepted only when enough
independent build-and-mine runs give exactly the same set: two of three in the paper,
in general a strict majority and never fewer than two (one run alone is taken as is,
since there is nothing to vote on). Otherwise the trajectory is discarded as unreliable.

Runs happen one after another so that the vote can stop as soon as it is decided: when
the first two of three agree, the third cannot change the outcome and is not built.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

ActionSet = tuple[str, ...]


def required_agreement(repeats: int) -> int:
    """Identical runs needed to accept: 1 for a single run, else a majority, at least 2."""
    if repeats <= 1:
        return 1
    return max(2, repeats // 2 + 1)


@dataclass(frozen=True)
class VoteResult:
    accepted: ActionSet | None
    """The agreed set of necessary actions, or None (discarded)."""
    agreeing: int
    runs: int
    failed: int
    """Runs whose graph could not be built or mined."""
    needed: int

    @property
    def reason(self) -> str:
        if self.accepted is not None:
            return f"{self.agreeing} of {self.runs} runs agree"
        if self.failed == self.runs:
            return f"no graph could be built in {self.runs} run(s)"
        return (f"runs disagree: at most {self.agreeing} of {self.runs} give the same "
                f"actions, {self.needed} needed ({self.failed} failed to build)")


def tally(sets: list[ActionSet | None], repeats: int) -> VoteResult | None:
    """The vote's result once it is decided by ``sets`` (None: a failed run), else None.

    Decided means some set has the required agreement, or no set can still reach it with
    the runs that are left (all ``repeats`` runs done included).
    """
    need = required_agreement(repeats)
    counts = Counter(s for s in sets if s is not None)
    best, agreeing = counts.most_common(1)[0] if counts else (None, 0)
    failed = sum(s is None for s in sets)
    if agreeing >= need:
        return VoteResult(best, agreeing, len(sets), failed, need)
    if agreeing + (repeats - len(sets)) < need or len(sets) >= repeats:
        return VoteResult(None, agreeing, len(sets), failed, need)
    return None
