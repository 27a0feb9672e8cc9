"""``linewise report A B … --out DIR``: several benches side by side.

    DIR/report.md, report.html, report.json   the comparison (``data.Comparison``)
    DIR/view/index.html                       one viewer index over every bench

Each bench gets its own report and viewer first, exactly as ``linewise report A``
writes them into ``A``: the comparison's links lead into them, and its numbers are
theirs. ``DIR`` may be none of the benches (their own report.md would be overwritten).
"""

from __future__ import annotations

from pathlib import Path

from linewise.agent.filters.cost_gate import Prices
from linewise.apps.bench.report import write_report
from linewise.apps.compare.benches import check_out, read_benches
from linewise.apps.compare.data import Comparison, build_comparison
from linewise.apps.compare.html import render_html
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
    for bench in benches:
        if bench.results:
            write_report(bench.path, prices, max_rounds)
        else:  # a bench with no results line yet has no report, but its plan is shown
            write_viewer(bench.path)
    comparison = build_comparison(benches, prices, max_rounds)
    out_dir.mkdir(parents=True, exist_ok=True)
    index = write_study_index(benches, comparison.benches, out_dir, title=title(comparison),
                              comparison=out_dir / "report.html")
    pages = {
        (b.label, r.episode_dir): link(b.path / VIEW_DIR / episode_page(r.episode_dir), out_dir)
        for b in benches for r in b.results
        if r.episode_dir and (b.path / r.episode_dir / "summary.json").exists()
    }
    bench_links = {b.label: link(b.path, out_dir) for b in benches}
    written = []
    for name, text in (
        ("report.md", render_markdown(comparison)),
        ("report.html", render_html(comparison, bench_links, pages,
                                    index=link(index, out_dir))),
        ("report.json", comparison.model_dump_json(indent=2)),
    ):
        path = out_dir / name
        write_atomically(path, text)
        written.append(path)
    return comparison, written
