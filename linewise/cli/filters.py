"""``linewise filters [--all]``: the observation filters, the focus presets and stages.

Everything printed comes from the registry (agent/filters/registry.py) and the focus
configuration (agent/filters/stages/presets.py), as do the ``--filter`` helps and the
tables of docs/filters.md (cli/docs.py): the lists cannot drift apart.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap

from linewise.agent.filters.registry import FilterRegistration, filter_registrations
from linewise.agent.filters.stages.presets import (
    ALWAYS,
    DEFAULT_PRESET,
    DEFAULT_STAGES,
    PRESETS,
    STAGES,
    FocusPreset,
)
from linewise.cli.commands import summary
from linewise.cli.flags import DEFAULT_FILTER


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    filters = sub.add_parser("filters", help=summary("filters"))
    filters.add_argument("--all", action="store_true",
                         help="also list the research variants (hidden filters)")
    filters.set_defaults(handler=cmd_filters)


def stages_summary(stages: tuple[str, ...]) -> str:
    """``stages`` against the standard set: ``standard + expansion + units - embedding``."""
    added = [s for s in stages if s not in DEFAULT_STAGES]
    dropped = [s for s in DEFAULT_STAGES if s not in stages and s != ALWAYS]
    if len(added) + len(dropped) > len(stages) // 2:
        return ", ".join(s for s in stages if s != ALWAYS)
    return " ".join(["standard", *(f"+ {s}" for s in added), *(f"- {s}" for s in dropped)])


def preset_summary(preset: FocusPreset) -> str:
    """The preset's configuration in one line."""
    items = ", with items" if preset.items else ""
    return f"{stages_summary(preset.stages)}; chooser {preset.chooser}{items}"


def filter_label(registration: FilterRegistration) -> str:
    marks = [m for m, on in (("default", registration.name == DEFAULT_FILTER),
                             ("retriever", registration.needs_retriever)) if on]
    return f"{registration.name} ({', '.join(marks)})" if marks else registration.name


def _rows(rows: list[tuple[str, str]], width: int) -> list[str]:
    """``name  description`` rows, descriptions wrapped under themselves."""
    left = max(len(name) for name, _ in rows) + 2
    out: list[str] = []
    for name, text in rows:
        wrapped = textwrap.wrap(text.replace("`", ""), max(30, width - left - 2),
                                break_on_hyphens=False) or [""]
        out.append(f"  {name.ljust(left)}{wrapped[0]}")
        out += [" " * (left + 2) + line for line in wrapped[1:]]
    return out


def filters_text(*, include_hidden: bool = False, width: int = 100) -> str:
    """What ``linewise filters`` prints."""
    public = filter_registrations()
    lines = ["Filters (--filter NAME; 'retriever': opens the retriever model):"]
    lines += _rows([(filter_label(r), r.description) for r in public], width)
    if include_hidden:
        shown = {r.name for r in public}
        hidden = [r for r in filter_registrations(include_hidden=True) if r.name not in shown]
        lines += ["", "Research variants (accepted by --filter, not listed by default):"]
        lines += _rows([(filter_label(r), r.description) for r in hidden], width)
    lines += ["", f"focus presets (--focus-preset NAME, default {DEFAULT_PRESET}):"]
    lines += _rows([(name, f"{p.description} [{preset_summary(p)}]")
                    for name, p in PRESETS.items()], width)
    standard = ", ".join(s for s in DEFAULT_STAGES if s != ALWAYS)
    lines += ["", *textwrap.wrap(f"focus stages (--focus-stages A,B,… replaces the preset's; "
                                 f"standard: {standard}):", width, break_on_hyphens=False)]
    lines += _rows(list(STAGES.items()), width)
    if not include_hidden:
        lines += ["", "Research variants: linewise filters --all"]
    return "\n".join(lines)


def cmd_filters(args: argparse.Namespace) -> int:
    width = min(shutil.get_terminal_size((100, 24)).columns, 120)
    print(filters_text(include_hidden=args.all, width=width))
    return 0
