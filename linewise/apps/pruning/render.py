"""A state graph as an SVG picture, for people to look at (no graphviz needed).

Layout: the node list is in trajectory order (the extractor writes it so), so an edge
to an earlier node closes a loop (a page seen again). The other edges form a DAG, and
each node's column is its longest path in it: the goal on the left, the answer on the
right, every forward edge pointing right. Loops are drawn as dashed red curves.
Necessary actions are green, pruned actions grey, information on a necessary path blue.
Hovering a node shows its full text.
"""

from __future__ import annotations

from html import escape

from linewise.apps.pruning.graph import StateGraph

BOX_W, BOX_H, COL_W, ROW_H, MARGIN = 170, 44, 220, 58, 20
COLOURS = {
    ("action", True): ("#d9f2d9", "#2e7d32"),
    ("action", False): ("#eeeeee", "#9e9e9e"),
    ("info", True): ("#dceaf7", "#1565c0"),
    ("info", False): ("#fafafa", "#bdbdbd"),
}


def _label(node: dict[str, object]) -> tuple[str, str]:
    """(short text shown in the box, full text for the tooltip)."""
    if node["kind"] == "action":
        full = f"{node.get('type', '')}: {node.get('goal', '')} {node.get('action', '')}"
    else:
        full = str(node.get("text", ""))
    full = " ".join(full.split())
    return (full if len(full) <= 26 else full[:25] + "…"), full


def render_svg(graph: StateGraph, necessary: set[str], title: str = "") -> str:
    """The SVG text of ``graph`` with the ``necessary`` node ids highlighted."""
    ids = [n.id for n in graph.nodes]
    order = {node_id: position for position, node_id in enumerate(ids)}
    forward_preds: dict[str, list[str]] = {i: [] for i in ids}
    for start, end in graph.edges:
        if order[start] < order[end]:
            forward_preds[end].append(start)
    column_of: dict[str, int] = {}
    for node_id in ids:
        column_of[node_id] = max((column_of[u] + 1 for u in forward_preds[node_id]), default=0)
    columns: dict[int, list[str]] = {}
    for node_id in ids:
        columns.setdefault(column_of[node_id], []).append(node_id)
    position: dict[str, tuple[int, int]] = {}
    for column, members in columns.items():
        for row, node_id in enumerate(members):
            position[node_id] = (MARGIN + column * COL_W, MARGIN + 24 + row * ROW_H)
    width = MARGIN * 2 + (max(columns) + 1) * COL_W
    height = MARGIN * 2 + 24 + max(len(m) for m in columns.values()) * ROW_H
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker>'
        '</defs>',
        f'<text x="{MARGIN}" y="{MARGIN + 4}" font-size="13">{escape(title)}</text>',
    ]
    for start, end in graph.edges:
        (x1, y1), (x2, y2) = position[start], position[end]
        if x2 > x1:
            parts.append(f'<line x1="{x1 + BOX_W}" y1="{y1 + BOX_H // 2}" x2="{x2}" '
                         f'y2="{y2 + BOX_H // 2}" stroke="#999" marker-end="url(#arrow)"/>')
        else:  # a back edge: a dashed curve over the top
            lift = min(y1, y2) - 18
            parts.append(f'<path d="M{x1 + BOX_W // 2},{y1} C{x1 + BOX_W // 2},{lift} '
                         f'{x2 + BOX_W // 2},{lift} {x2 + BOX_W // 2},{y2}" fill="none" '
                         f'stroke="#c62828" stroke-dasharray="4 3" marker-end="url(#arrow)"/>')
    for node in graph.nodes:
        x, y = position[node.id]
        data = node.model_dump()
        fill, stroke = COLOURS[(node.kind, node.id in necessary)]
        short, full = _label(data)
        radius = 4 if node.kind == "action" else 16
        parts.append(
            f'<g><title>{escape(node.id)}: {escape(full)}</title>'
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="{radius}" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
            f'<text x="{x + 8}" y="{y + 17}" font-weight="bold">{escape(node.id)}</text>'
            f'<text x="{x + 8}" y="{y + 33}">{escape(short)}</text></g>'
        )
    parts.append("</svg>")
    return "\n".join(parts)
