"""The ``focus`` filter's configuration: its candidate stages and its named presets.

``focus`` (:mod:`.focus`) is one pipeline: cheap *stages* propose candidate lines
(:mod:`.candidates`), a *chooser* turns them into the view (the retriever model picks
among them, or the candidates are the view), and ``items`` optionally widens each
kept line to its enclosing item (:mod:`.items`). Which stages run, the chooser and
``items`` are configuration (``FocusConfig.stages``/``chooser``/``items``); a
*preset* names one such configuration. This module is the one list of both, read by
the filter, the settings' checks, ``linewise filters`` and the tables of docs/filters.md.

The presets reproduce, exactly, the filters measured in benchmarks/NOTES.md under
their ``focus-…`` names, which stay available as research aliases (``focus-<preset>``).
Why the stages, items and shares are what they are: docs/design.md, "Candidates, items
and shares".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from linewise.errors import ConfigError
from linewise.settings import FilterSettings

__all__ = [
    "ALWAYS",
    "CHOOSERS",
    "DEFAULT_PRESET",
    "DEFAULT_STAGES",
    "PRESETS",
    "STAGES",
    "Chooser",
    "FocusPreset",
    "check_stages",
    "get_preset",
    "parse_stages",
]

Chooser = Literal["model", "none"]

ALWAYS = "guard"
"""The stage that always runs: the recall guard's elements must be in every view."""

STAGES: dict[str, str] = {
    ALWAYS: "the focused element and the elements the last actions and error named "
    "(always on)",
    "named": "lines whose names hold what the goal quotes or names in code "
    "(`'Submit'`, `json.loads`, `--malloc-fill`)",
    "followed": "the section an in-page link of the last action opened, and the "
    "neighbourhood of the element it named",
    "lexical": "BM25 hits on goal + recent actions + thoughts, ± 2 lines",
    "passages": "BM25 hits on whole blocks read with what they belong to (a term with "
    "its definition, a row, a list item)",
    "expansion": "the retriever reads only the goal and history and names the words the "
    "needed element likely shows (`City` for \"the town I live in\"): their BM25 hits "
    "(one short call per new history; needs the retriever)",
    "outline": "search boxes, dialogs, headings, landmarks, form fields, tabs, table "
    "headers, terms",
    "referred": "the entries (terms, headings) that the best lines of the word-matching "
    "stages mention by name",
    "changed": "runs of lines that changed since the last step",
    "units": "the page's blocks, each with its term, heading or row, scored by the "
    "embedder (offline MiniLM unless one is configured; seconds per new large page)",
    "embedding": "100-token chunks most similar to the query, with their anchor (only "
    "when an embedder is configured: LINEWISE_FILTER__EMBEDDING_*)",
}
"""Every stage, in the order the candidates take their turns (:data:`.candidates.STAGE_TURNS`),
with what it proposes."""

CHOOSERS: dict[str, str] = {
    "model": "the retriever reads the candidates (within the budget) and picks line "
    "ranges; the view is its choice, the best lexical hits and the guarded elements",
    "none": "no model call: the candidates, in the order the stages proposed them, are "
    "the view",
}

DEFAULT_STAGES: tuple[str, ...] = (
    "guard", "named", "followed", "lexical", "passages", "outline", "referred", "changed",
    "embedding",
)
"""The stages of the original ``focus`` filter: every one but those that cost a model
call (``expansion``) or an embedder of their own (``units``)."""


@dataclass(frozen=True)
class FocusPreset:
    name: str
    stages: tuple[str, ...]
    chooser: Chooser
    items: bool
    description: str
    reserve_share: float = 0.0
    """Of the view budget, the share kept for every stage's best candidate lines before
    items fill the rest (``FocusConfig.reserve_share``)."""


def _with(*extra: str, without: Iterable[str] = ()) -> tuple[str, ...]:
    dropped = set(without)
    return check_stages([*(s for s in DEFAULT_STAGES if s not in dropped), *extra])


def check_stages(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` in the canonical order, ``guard`` included and duplicates dropped; an
    unknown name is a ConfigError listing the valid ones."""
    wanted = {name.strip() for name in names if name.strip()}
    unknown = sorted(wanted - set(STAGES))
    if unknown:
        raise ConfigError(
            f"unknown focus stage{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))}; valid: {', '.join(STAGES)}"
        )
    wanted.add(ALWAYS)
    return tuple(stage for stage in STAGES if stage in wanted)


def parse_stages(text: str) -> tuple[str, ...]:
    """``"lexical,named"`` as checked stages (``--focus-stages``)."""
    return check_stages(text.split(","))


SHARED = 0.4
"""The reserved share of the shared presets, chosen before any share was scored."""

_PRESETS: tuple[FocusPreset, ...] = (
    FocusPreset(
        "expand-shared-units", _with("expansion", "units", without=["embedding"]), "none",
        True, "expand-units with a share of the view kept for every stage's best lines, so "
        "no stage's items push out another's best hit. The best recall measured "
        "(benchmarks/NOTES.md)", reserve_share=SHARED,
    ),
    FocusPreset(
        "shared-items", DEFAULT_STAGES, "none", True,
        "model-free, under a second: candidates-items with the shared view",
        reserve_share=SHARED,
    ),
    FocusPreset(
        "expand-units", _with("expansion", "units", without=["embedding"]), "none", True,
        "every word stage, query expansion and embedded units; each candidate with its "
        "item, no choosing call",
    ),
    FocusPreset(
        "expand-items", _with("expansion"), "none", True,
        "candidates with query expansion, each with its item; no choosing call",
    ),
    FocusPreset(
        "candidates-units", _with("units", without=["embedding"]), "none", True,
        "model-free: candidates with embedded units, each with its item",
    ),
    FocusPreset(
        "candidates-items", DEFAULT_STAGES, "none", True,
        "model-free, under a second: the candidates, each with its enclosing item",
    ),
    FocusPreset(
        "candidates", DEFAULT_STAGES, "none", False,
        "model-free, a fraction of a second: the candidate lines themselves",
    ),
    FocusPreset(
        "choose", DEFAULT_STAGES, "model", False,
        "the retriever chooses lines among the candidates (the original `focus`)",
    ),
    FocusPreset(
        "items", DEFAULT_STAGES, "model", True,
        "the retriever chooses; each chosen line with its enclosing item",
    ),
)

PRESETS: dict[str, FocusPreset] = {preset.name: preset for preset in _PRESETS}
"""Preset name -> its configuration; ``focus-<name>`` is each one's research alias."""

DEFAULT_PRESET: str = FilterSettings.model_fields["focus_preset"].default
"""What ``--filter focus`` runs unless ``--focus-preset`` says otherwise (the default
lives in the settings, which cannot import this module)."""


def get_preset(name: str) -> FocusPreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"unknown focus preset {name!r}; available: {', '.join(PRESETS)}"
        ) from None
