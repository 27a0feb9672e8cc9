"""``report.md``: the bench report as Markdown tables."""

from __future__ import annotations

from linewise.apps.bench.report_data import (
    GROUP_HEADER,
    TASK_HEADER,
    Report,
    group_columns,
    preamble,
    task_columns,
)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in rows]
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    out = [f"# Bench report: {report.bench}", "", *preamble(report), ""]
    out += ["## Agents and filters", "",
            _md_table(["agent", "filter", *GROUP_HEADER],
                      [[g.label["agent"], g.label["filter"], *group_columns(g)]
                       for g in report.overall]), ""]
    out += ["## Per benchmark", "",
            _md_table(["benchmark", "agent", "filter", *GROUP_HEADER],
                      [[g.label["benchmark"], g.label["agent"], g.label["filter"],
                        *group_columns(g)] for g in report.by_benchmark]), ""]
    out += ["## Per task", "", _md_table(TASK_HEADER, [task_columns(g)
                                                      for g in report.by_task]), ""]
    return "\n".join(out)
