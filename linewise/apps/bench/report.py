"""``linewise report DIR``: the bench's results as tables (``report.md``), a page with
plots (``report.html``) and the same numbers for programs (``report.json``).

The numbers come from ``report_data``; each file has its own renderer. Each opens with
the bench's state (``state.py``): what it covers of the plan, why the bench stopped and
how to resume it.
"""

from __future__ import annotations

from pathlib import Path

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.apps.bench.report_data import Report, build_report, load_results
from linewise.apps.bench.report_html import render_html
from linewise.apps.bench.report_markdown import render_markdown
from linewise.apps.bench.state import bench_state
from linewise.apps.viewer.build import write_viewer
from linewise.apps.viewer.paths import VIEW_DIR, episode_page
from linewise.files import write_atomically


def write_report(out_dir: Path, prices: Prices | None = None,
                 max_rounds: float | None = None) -> tuple[Report, list[Path]]:
    """Write report.md, report.html and report.json into ``out_dir``, and the trace
    viewer (``view/``) that report.html links each task's episodes to."""
    results = load_results(out_dir)
    report = build_report(results, str(out_dir), prices or Prices(), max_rounds,
                          bench_state(out_dir, results))
    write_viewer(out_dir)
    pages = {
        r.episode_dir: f"{VIEW_DIR}/{episode_page(r.episode_dir)}"
        for r in results if r.episode_dir and (out_dir / r.episode_dir / "summary.json").exists()
    }
    written = []
    for name, text in (
        ("report.md", render_markdown(report)),
        ("report.html", render_html(report, results, pages)),
        ("report.json", report.model_dump_json(indent=2)),
    ):
        path = out_dir / name
        write_atomically(path, text)
        written.append(path)
    return report, written
