"""``linewise report A B … --out DIR``: several benches side by side; ``linewise report
IMPROVE_DIR``: an improve folder's round benches side by side, its rounds first.

    DIR/report.md, report.html, report.json   the comparison (``data.Comparison``)
    DIR/view/index.html                       one viewer index over every bench

Each bench gets its own report and viewer first, exactly as ``linewise report A``
writes them into ``A``: the comparison's links lead into them, and its numbers are
theirs. ``DIR`` may be none of the benches (their own report.md would be overwritten).
An improve folder's report goes into the folder itself (``compare/improve.py``).
"""

from __future__ import annotations

from pathlib import Path

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.apps.bench.report import write_report
from linewise.apps.compare.benches import Bench, check_out, read_benches
from linewise.apps.compare.data import Comparison, build_comparison
from linewise.apps.compare.html import render_html
from linewise.apps.compare.improve import (
    ImproveStudy,
    read_improve,
    rebuild_report,
    round_arms,
    rounds_html,
    rounds_markdown,
    write_loop_report,
)
from linewise.apps.compare.index import link, write_study_index
from linewise.apps.compare.markdown import render_markdown
from linewise.apps.compare.tables import title
from linewise.apps.viewer.build import write_viewer
from linewise.apps.viewer.paths import VIEW_DIR, episode_page
from linewise.files import write_atomically


def write_comparison(paths: list[Path], labels: list[str], out_dir: Path,
                     prices: Prices | None = None,
                     max_rounds: float | None = None) -> tuple[Comparison, list[Path]]:
    """Write each bench's own report, then the comparison and its viewer index into
    ``out_dir``; returns the comparison and the files written (the comparison's)."""
    prices = prices or Prices()
    benches = read_benches(paths, labels)
    check_out(benches, out_dir, "its own report")
    comparison = _compare(benches, prices, max_rounds)
    out_dir.mkdir(parents=True, exist_ok=True)
    index = write_study_index(benches, comparison.benches, out_dir, title=title(comparison),
                              comparison=out_dir / "report.html")
    links = _links(benches, out_dir)
    return comparison, _write(out_dir, (
        ("report.md", render_markdown(comparison)),
        ("report.html", render_html(comparison, links, _pages(benches, out_dir),
                                    index=link(index, out_dir))),
        ("report.json", comparison.model_dump_json(indent=2)),
    ))


def write_improve_report(improve_dir: Path, prices: Prices | None = None,
                         max_rounds: float | None = None) -> tuple[ImproveStudy, list[Path]]:
    """``linewise report IMPROVE_DIR``: each round bench's own report, improve.json and
    improve.md counted again from the benches, then report.md/.html/.json (the rounds arm
    by arm, then the round benches compared) and the viewer index, into the folder.
    Returns the report and the files written into the folder itself."""
    prices = prices or Prices()
    benches = read_improve(improve_dir)
    comparison = _compare(benches, prices, max_rounds)
    loop = rebuild_report(improve_dir, benches)
    written = write_loop_report(improve_dir, loop)
    study = ImproveStudy(**dict(comparison), improve=loop, rounds=round_arms(loop, benches))
    heading = f"Improve loop: {improve_dir.resolve().name}"
    index = write_study_index(benches, comparison.benches, improve_dir,
                              title=improve_dir.resolve().name, improve_dir=improve_dir,
                              comparison=improve_dir / "report.html")
    links = _links(benches, improve_dir)
    return study, written + _write(improve_dir, (
        ("report.md", render_markdown(comparison, heading=heading,
                                      opening=rounds_markdown(loop, study.rounds))),
        ("report.html", render_html(comparison, links, _pages(benches, improve_dir),
                                    index=link(index, improve_dir), heading=heading,
                                    opening=rounds_html(loop, study.rounds, links))),
        ("report.json", study.model_dump_json(indent=2)),
    ))


def _compare(benches: list[Bench], prices: Prices, max_rounds: float | None) -> Comparison:
    """Each bench's own report (a bench with no results line yet has none, but its plan
    is shown in its viewer), then their comparison."""
    for bench in benches:
        if bench.results:
            write_report(bench.path, prices, max_rounds)
        else:
            write_viewer(bench.path)
    return build_comparison(benches, prices, max_rounds)


def _links(benches: list[Bench], out_dir: Path) -> dict[str, str]:
    """Each bench's folder, relative to ``out_dir``, by label."""
    return {b.label: link(b.path, out_dir) for b in benches}


def _pages(benches: list[Bench], out_dir: Path) -> dict[tuple[str, str], str]:
    """Each episode's page in its bench's viewer, relative to ``out_dir``."""
    return {
        (b.label, r.episode_dir): link(b.path / VIEW_DIR / episode_page(r.episode_dir), out_dir)
        for b in benches for r in b.results
        if r.episode_dir and (b.path / r.episode_dir / "summary.json").exists()
    }


def _write(out_dir: Path, files: tuple[tuple[str, str], ...]) -> list[Path]:
    written = []
    for name, text in files:
        path = out_dir / name
        write_atomically(path, text)
        written.append(path)
    return written
