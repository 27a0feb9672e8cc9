"""One viewer index over several benches, or over an improve folder's round benches.

    OUT/view/index.html       the index: a table of the benches (an improve folder's
                              rounds first), then every episode of every bench, each
                              row labelled with its bench
    OUT/view/data/index.js    its rows
    OUT/view/assets/          the viewer's script and style

Each bench keeps its own viewer (``BENCH/view/``, written here as ``linewise view
BENCH`` writes it): the index links to its episode pages there, by paths relative to
``OUT/view/``, so the pages open from disk and the benches are never copied. The
numbers of the benches' table are their reports' (``compare.data``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.apps.bench.report_data import errors_text, infra_text, success_text
from linewise.apps.compare.benches import (
    ROUND_PARTS,
    Bench,
    check_out,
    improve_benches,
    read_bench,
    round_folders,
)
from linewise.apps.compare.data import BenchRow, build_comparison
from linewise.apps.compare.tables import bench_opening
from linewise.apps.improve.report import Success, read_report, success_cell
from linewise.apps.viewer.build import (
    ASSETS,
    StepsOf,
    asset_text,
    data_script,
    index_payload,
    page_html,
    write_viewer,
)
from linewise.apps.viewer.discover import EpisodeFolder, find_episodes
from linewise.apps.viewer.output import ViewOutput
from linewise.apps.viewer.paths import VIEW_DIR
from linewise.errors import ConfigError
from linewise.records import StepRecord


class BenchEntry(BaseModel):
    """A bench in the index's table of benches."""

    label: str
    path: str
    index: str = Field(description="Its own viewer index, relative to OUT/view/.")
    report: str | None = Field(description="Its report.html, relative to OUT/view/.")
    state: list[str] = Field(description="Its state, as its report opens with it.")
    complete: bool
    planned: int | None
    ran: int
    left: int
    episodes: int
    agent_outcomes: int
    success: str
    infrastructure: str
    errors: str


class RoundPart(BaseModel):
    label: str = Field(description="The bench's label (``round-1/test``).")
    success: str = Field(description="As improve.md gives it: ``62.5 ± 17.1 (5/8)``.")
    running: bool = Field(description="Its run recorded no end yet.")


class RoundEntry(BaseModel):
    """A row of an improve folder's rounds table."""

    round: int
    memory_entries: str
    skills: str | None
    parts: dict[str, RoundPart] = Field(description="By part: train, test, test-skills.")


def link(target: Path, view_dir: Path) -> str:
    """``target`` as a link from a page in ``view_dir`` (a relative path: the pages open
    from disk, and the folders may be moved together)."""
    return Path(os.path.relpath(target.resolve(), view_dir.resolve())).as_posix()


Linker = Callable[[int, Bench, str], "str | None"]
"""The link from the index to a file of bench number N (its path below the bench
folder), or None where the index may not link to it: relative paths on disk
(``disk_links``), the benches' places in the server's URLs under ``--serve``."""


def disk_links(view_dir: Path) -> Linker:
    """Links from an index written into ``view_dir`` to the benches' files on disk."""
    return lambda number, bench, rel: link(bench.path / rel, view_dir)


def _entry(bench: Bench, number: int, row: BenchRow, link_to: Linker) -> BenchEntry:
    report = bench.path / "report.html"
    state = row.state
    return BenchEntry(
        label=bench.label, path=str(bench.path),
        index=link_to(number, bench, f"{VIEW_DIR}/index.html") or "",
        report=link_to(number, bench, "report.html") if report.is_file() else None,
        state=[line.text + (f" {line.command}" if line.command else "") + line.after
               for line in bench_opening(row)],
        complete=state.complete, planned=state.planned, ran=state.ran, left=state.left,
        episodes=row.total.episodes, agent_outcomes=row.total.agent_episodes,
        success=success_text(row.total), infrastructure=infra_text(row.total),
        errors=errors_text(row.total))


def _rows(bench: Bench, number: int, link_to: Linker,
          steps_of: StepsOf | None) -> tuple[list[Any], list[Any]]:
    """The bench's index rows and not-run rows, labelled, their links made the index's
    (``key`` too is made the bench's own: two benches share episode keys); ``steps_of``
    reads a running episode's steps (``--serve`` reads on from where it stopped)."""
    episodes = find_episodes(bench.path)
    payload = (index_payload(bench.path, "bench", episodes) if steps_of is None
               else index_payload(bench.path, "bench", episodes, steps_of))
    for row in payload["episodes"] + payload["not_run"]:
        row["bench"] = bench.label
        if "key" in row:
            row["key"] = f"{number}:{row['key']}"
            row["page"] = link_to(number, bench, f"{VIEW_DIR}/{row['page']}")
        for attempt in row.get("attempts", []):
            attempt["page"] = link_to(number, bench, f"{VIEW_DIR}/{attempt['page']}")
    return payload["episodes"], payload["not_run"]


def _rounds(improve_dir: Path, benches: dict[str, Bench]) -> list[RoundEntry]:
    """The rounds table: improve.json's memory and skill counts, and each part's
    success from its bench folder, as improve counts it (a round still running has its
    benches, and no row in improve.json yet)."""
    try:
        recorded = {row.round: row for row in read_report(improve_dir).rounds}
    except (OSError, ValueError):
        recorded = {}
    rounds = []
    for number, _ in round_folders(improve_dir):
        row = recorded.get(number)
        parts = {}
        for part in ROUND_PARTS:
            bench = benches.get(f"round-{number}/{part}")
            if bench is not None:
                parts[part] = RoundPart(label=bench.label,
                                        success=success_cell(Success.of(bench.results)),
                                        running=bench.state.stop == "killed")
        memory = ("–" if number == 0 else "?" if row is None
                  else f"{row.memory_entries} ({row.memory_from_pruner})")
        skills = None if row is None or row.skills is None else str(row.skills)
        rounds.append(RoundEntry(round=number, memory_entries=memory, skills=skills,
                                 parts=parts))
    return rounds


BenchSteps = Callable[[Bench, EpisodeFolder], list[StepRecord]]
"""A running episode's steps so far, read by the server that follows its bench."""


def study_rows(benches: list[Bench], link_to: Linker,
               steps_of: BenchSteps | None = None) -> tuple[list[Any], list[Any]]:
    """Every episode of every bench (the index's rows), then the planned ones not run."""
    episodes: list[Any] = []
    not_run: list[Any] = []
    for number, bench in enumerate(benches):
        ran, left = _rows(bench, number, link_to, None if steps_of is None else
                          functools.partial(steps_of, bench))
        episodes += ran
        not_run += left
    return episodes, not_run


def study_payload(benches: list[Bench], rows: list[BenchRow], *, title: str,
                  improve_dir: Path | None, link_to: Linker, comparison: str | None = None,
                  steps_of: BenchSteps | None = None) -> dict[str, Any]:
    """The index's data (``data/index.js``): the benches' table, an improve folder's
    rounds, then every episode of every bench. ``steps_of``: a running episode's steps
    so far (``--serve``)."""
    episodes, not_run = study_rows(benches, link_to, steps_of)
    payload: dict[str, Any] = {
        "title": title, "kind": "improve" if improve_dir is not None else "benches",
        "benches": [_entry(b, n, r, link_to).model_dump()
                    for n, (b, r) in enumerate(zip(benches, rows, strict=True))],
        "episodes": episodes, "not_run": not_run, "comparison": comparison,
    }
    if improve_dir is not None:
        payload["rounds"] = [r.model_dump() for r in _rounds(
            improve_dir, {b.label: b for b in benches})]
    return payload


def write_study_index(benches: list[Bench], rows: list[BenchRow], out_dir: Path, *,
                      title: str, improve_dir: Path | None = None,
                      comparison: Path | None = None) -> Path:
    """Write ``out_dir/view/``: the index over ``benches`` (whose own viewers are
    written: ``write_viewer``), ``rows`` their numbers (``data.build_comparison``).
    ``improve_dir``: the benches are that improve folder's rounds (its rounds table
    opens the page); ``comparison``: a comparison report to link to. Returns the
    index page."""
    view_dir = out_dir / VIEW_DIR
    payload = study_payload(
        benches, rows, title=title, improve_dir=improve_dir, link_to=disk_links(view_dir),
        comparison=link(comparison, view_dir) if comparison is not None else None)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = ViewOutput(out_dir)
    for name in ASSETS:
        out.write_text(f"assets/{name}", asset_text(name))
    out.write_text("data/index.js", data_script("index", "", payload))
    out.write_text("index.html", page_html("index.html", base="", key="", title=title))
    return view_dir / "index.html"


def view_benches(benches: list[Bench], out_dir: Path, *, title: str,
                 improve_dir: Path | None = None) -> Path:
    """``linewise view A B --out DIR`` (and an improve folder): each bench's own viewer,
    then the index over them; a comparison report already in ``out_dir`` is linked."""
    if improve_dir is None:
        check_out(benches, out_dir, "its own viewer index")
    for bench in benches:
        write_viewer(bench.path)
    rows = build_comparison(benches, Prices()).benches
    report = out_dir / "report.html"
    return write_study_index(benches, rows, out_dir, title=title, improve_dir=improve_dir,
                             comparison=report if report.is_file() else None)


def view_improve(improve_dir: Path) -> Path:
    """``linewise view IMPROVE_DIR``: its rounds table and every round bench's episodes,
    in ``IMPROVE_DIR/view/``."""
    benches = [read_bench(path, label) for label, path in improve_benches(improve_dir)]
    if not benches:
        raise ConfigError(f"{improve_dir} holds no round bench yet (round-N/test, "
                          "round-N/train): nothing to show")
    return view_benches(benches, improve_dir, title=improve_dir.resolve().name,
                        improve_dir=improve_dir)
