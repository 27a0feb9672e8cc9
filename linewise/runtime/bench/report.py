"""``linewise report DIR``: the bench's results as tables (``report.md``), a page with
plots (``report.html``) and the same numbers for programs (``report.json``).

The numbers come from ``report_data``; each file has its own renderer.
"""

from __future__ import annotations

from pathlib import Path

from linewise.agent.filters.cost_gate import Prices
from linewise.runtime.bench.report_data import Report, build_report, load_results
from linewise.runtime.bench.report_html import render_html
from linewise.runtime.bench.report_markdown import render_markdown


def write_report(out_dir: Path, prices: Prices | None = None,
                 max_rounds: float | None = None) -> tuple[Report, list[Path]]:
    """Write report.md, report.html and report.json into ``out_dir``."""
    results = load_results(out_dir)
    report = build_report(results, str(out_dir), prices or Prices(), max_rounds)
    written = []
    for name, text in (
        ("report.md", render_markdown(report)),
        ("report.html", render_html(report, results)),
        ("report.json", report.model_dump_json(indent=2)),
    ):
        path = out_dir / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return report, written
