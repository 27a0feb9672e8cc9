"""The bench folders a comparison is of: each read once and given a label.

A label is what a person tells the benches apart by in every table and in the viewer:
``--label`` when given, else the folder's name, with as many of its parents as it takes
to tell two folders of one name apart (``a/bench`` and ``b/bench``).

An improve folder (``linewise improve --out DIR``) is a study of its own: its round
benches (``round-R/train``, ``round-R/test``, ``round-R/test-skills``) labelled by
round and part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from linewise.apps.bench.manifest import MANIFEST_FILE, read_manifest
from linewise.apps.bench.plan import EpisodeKey
from linewise.apps.bench.results import RESULTS_FILE, EpisodeResult, read_results
from linewise.apps.bench.state import BenchState, bench_state
from linewise.apps.improve.report import REPORT_FILE as IMPROVE_FILE
from linewise.errors import ConfigError

ROUND_PARTS = ("train", "test", "test-skills")
"""An improve round's benches, in the order its table gives them."""

_ROUND = re.compile(r"^round-(\d+)$")


@dataclass
class Bench:
    """One bench folder of a comparison."""

    label: str
    path: Path
    results: list[EpisodeResult]
    """Each episode once, as its last attempt ended (as its own report counts it)."""
    state: BenchState
    plan: set[EpisodeKey] | None
    """``bench.json``'s plan (None: from before plans were recorded)."""

    def planned(self, filter_name: str) -> int | None:
        """Episodes of the plan under one filter (None: the plan is unknown)."""
        if self.plan is None:
            return None
        return sum(key.filter == filter_name for key in self.plan)


def is_bench(path: Path) -> bool:
    return (path / RESULTS_FILE).is_file() or (path / MANIFEST_FILE).is_file()


def is_improve(path: Path) -> bool:
    """An improve folder: its report, or (a loop cut short before its first round
    ended) a round folder holding a bench."""
    return (path / IMPROVE_FILE).is_file() or bool(improve_benches(path))


def read_bench(path: Path, label: str) -> Bench:
    """The bench in ``path``; one that has no results line yet (just started) has none."""
    if not path.is_dir() or not is_bench(path):
        hint = (f": it is an improve folder; `linewise report {path}` reports its rounds "
                f"and `linewise view {path}` shows them" if path.is_dir() and is_improve(path)
                else "")
        raise ConfigError(f"{path} is not a bench folder (no {RESULTS_FILE} or "
                          f"{MANIFEST_FILE}){hint}")
    results = read_results(path / RESULTS_FILE) if (path / RESULTS_FILE).is_file() else []
    manifest = read_manifest(path)
    return Bench(label=label, path=path, results=results, state=bench_state(path, results),
                 plan=manifest.plan if manifest is not None else None)


def labels_for(paths: list[Path], given: list[str]) -> list[str]:
    """``given`` (one per folder, in order) or the shortest distinct trailing paths."""
    if given:
        if len(given) != len(paths):
            raise ConfigError(f"{len(given)} --label for {len(paths)} folders: give one "
                              "per folder, in the same order, or none")
        if len(set(given)) != len(given):
            raise ConfigError(f"--label: each bench needs its own label, got {given}")
        return given
    parts = [path.resolve().parts for path in paths]
    for depth in range(1, max(len(p) for p in parts) + 1):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [str(path) for path in paths]


def read_benches(paths: list[Path], given_labels: list[str]) -> list[Bench]:
    """The benches in ``paths``, labelled; the same folder twice is refused (it would
    read as two benches that agree)."""
    seen: dict[Path, Path] = {}
    for path in paths:
        if (same := seen.get(path.resolve())) is not None:
            raise ConfigError(f"{path} and {same} are the same folder: give each bench once")
        seen[path.resolve()] = path
    labels = labels_for(paths, given_labels)
    return [read_bench(path, label) for path, label in zip(paths, labels, strict=True)]


def check_out(benches: list[Bench], out_dir: Path, what: str) -> None:
    """Refuse an ``--out`` that is one of the benches: ``what`` (its own report, its own
    viewer index) would be overwritten."""
    if any(b.path.resolve() == out_dir.resolve() for b in benches):
        raise ConfigError(f"--out {out_dir} is one of the benches: {what} would be "
                          "overwritten; give another folder")


def round_folders(improve_dir: Path) -> list[tuple[int, Path]]:
    """An improve folder's ``round-R`` folders, by round."""
    try:
        found = [(int(m[1]), child) for child in improve_dir.iterdir()
                 if child.is_dir() and (m := _ROUND.match(child.name))]
    except OSError:
        return []
    return sorted(found)


def improve_benches(improve_dir: Path) -> list[tuple[str, Path]]:
    """(label, folder) of each bench of an improve folder, round by round."""
    return [(f"round-{number}/{part}", folder / part)
            for number, folder in round_folders(improve_dir)
            for part in ROUND_PARTS if is_bench(folder / part)]
