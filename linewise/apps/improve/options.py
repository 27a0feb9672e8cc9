"""What an improve run is asked for (``ImproveOptions``, ``SeedRange``) and what the loop
sets itself (``SET_BY_THE_LOOP``), apart from the loop: ``linewise improve --help`` is
built from them without importing the benches, the pruner and the model clients."""

from __future__ import annotations

from pydantic import BaseModel, Field

from linewise.errors import ConfigError

SET_BY_THE_LOOP = {"memory": "memory", "skills": "skills", "replay_cache": "replay cache"}
"""The agent settings each bench of the loop gets from the loop (its memory of the
rounds so far, its skills, its replay cache), by what they are: a value of the caller's
would be overridden, so it is refused, and ``linewise improve`` offers no flag for them."""


class SeedRange(BaseModel):
    """Seeds ``first`` to ``last``, both included."""

    first: int = Field(ge=0)
    last: int = Field(ge=0)

    @classmethod
    def parse(cls, text: str) -> SeedRange:
        """``A-B`` or ``A``."""
        first, _, last = text.strip().partition("-")
        try:
            seeds = cls(first=int(first), last=int(last or first))
        except ValueError as exc:
            raise ConfigError(f"seeds must be A-B or A (A <= B, not negative), got {text!r}"
                              ) from exc
        if seeds.last < seeds.first:
            raise ConfigError(f"seeds {text!r}: the first is after the last")
        return seeds

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    def overlaps(self, other: SeedRange) -> bool:
        return self.first <= other.last and other.first <= self.last

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


class ImproveOptions(BaseModel):
    rounds: int = Field(default=1, ge=1)
    train_seeds: SeedRange
    test_seeds: SeedRange
    baseline: bool = Field(default=True, description="Round 0: the test seeds, no memory.")
    prune: bool = Field(default=True, description="Prune each training bench.")
    skills: bool = Field(default=False, description="The skills arm: skills induced from "
                         "the training benches, and a test bench with them.")
    retrain_retriever: bool = Field(
        default=False, description="Each round, train the retriever on the training "
        "benches' solved steps (DIR/round-R/retriever) and run the round's test benches, "
        "and the next round's training bench, with it.")
    replay_cache: bool = Field(
        default=True, description="The training benches replay the training tasks solved "
        "in earlier rounds (DIR/replay-cache) instead of asking the model again.")
