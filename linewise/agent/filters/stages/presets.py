"""The ``focus`` filter's configuration: which candidate stages run, and named presets.

``focus`` (:mod:`..focus`) is one pipeline: cheap *stages* propose candidate lines
(:mod:`.candidates`), a *chooser* turns them into the view (the retriever model picks
among them, or the candidates are the view), and ``items`` optionally widens each
kept line to its enclosing item (:mod:`..view.items`). Which stages run, the chooser and
``items`` are configuration (``FocusConfig.stages``/``chooser``/``items``); a
*preset* names one such configuration. The stages themselves are :mod:`.catalog`'s;
this module is the one list of presets, read by the filter, the settings' checks,
``linewise filters`` and the tables of docs/filters.md.

The presets reproduce, exactly, the filters measured in benchmarks/NOTES.md under
their ``focus-…`` names, which stay available as research aliases (``focus-<preset>``).
Why the stages, items and shares are what they are: docs/design.md, "Candidates, items
and shares".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from linewise.agent.filters.stages.catalog import ALWAYS, FOCUS_STAGES
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

STAGES: dict[str, str] = {stage.name: stage.description for stage in FOCUS_STAGES}
"""Every stage's name, in the order the candidates take their turns, with what it
proposes (:data:`.catalog.FOCUS_STAGES`, where each stage is defined)."""

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
