"""Small inline-SVG charts for the HTML report: a scatter with error bars and box plots.

Hand-written rather than matplotlib: the report must be one self-contained file that
opens anywhere, the charts are simple, and the runtime should not pull a plotting stack.
Every chart is an ``<svg class="plot">`` with a title, axes, ticks and a legend.
"""

from __future__ import annotations

import html
import statistics
from dataclasses import dataclass

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")

WIDTH, HEIGHT = 560, 340
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 36, 56


@dataclass
class Point:
    x: float
    y: float
    y_err: float = 0.0
    label: str = ""
    color: str = PALETTE[0]


@dataclass
class Box:
    """One box: its series (legend and colour) and the values it summarizes."""

    series: str
    values: list[float]
    color: str


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        high = low + 1
    step = (high - low) / count
    return [low + i * step for i in range(count + 1)]


def _fmt(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value / 1000:.0f}k" if abs(value) >= 10000 else f"{value / 1000:.1f}k"
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2f}"


class _Frame:
    """Axes and scales shared by both chart kinds."""

    def __init__(self, name: str, title: str, x_label: str, y_label: str,
                 y_range: tuple[float, float]) -> None:
        self.name = name
        self.parts: list[str] = []
        self.y_low, self.y_high = y_range
        if self.y_high <= self.y_low:
            self.y_high = self.y_low + 1
        self.plot_w = WIDTH - LEFT - RIGHT
        self.plot_h = HEIGHT - TOP - BOTTOM
        self.parts.append(
            f'<text x="{WIDTH / 2 - RIGHT / 2}" y="20" text-anchor="middle" '
            f'font-weight="bold">{_esc(title)}</text>'
        )
        self.parts.append(
            f'<text x="{LEFT + self.plot_w / 2}" y="{HEIGHT - 12}" '
            f'text-anchor="middle">{_esc(x_label)}</text>'
        )
        self.parts.append(
            f'<text transform="translate(16,{TOP + self.plot_h / 2}) rotate(-90)" '
            f'text-anchor="middle">{_esc(y_label)}</text>'
        )
        for tick in _ticks(self.y_low, self.y_high):
            y = self.y(tick)
            self.parts.append(
                f'<line x1="{LEFT}" x2="{LEFT + self.plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
                'stroke="#e5e5e5"/>'
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
                f'font-size="11">{_fmt(tick)}</text>'
            )
        self.parts.append(
            f'<rect x="{LEFT}" y="{TOP}" width="{self.plot_w}" height="{self.plot_h}" '
            'fill="none" stroke="#444"/>'
        )

    def y(self, value: float) -> float:
        share = (value - self.y_low) / (self.y_high - self.y_low)
        return TOP + self.plot_h * (1 - share)

    def legend(self, entries: list[tuple[str, str]]) -> None:
        for i, (label, color) in enumerate(entries):
            y = TOP + 8 + i * 18
            x = WIDTH - RIGHT + 12
            self.parts.append(
                f'<rect class="legend" x="{x}" y="{y - 9}" width="10" height="10" '
                f'fill="{color}"/><text x="{x + 16}" y="{y}" font-size="12">'
                f"{_esc(label[:20])}</text>"
            )

    def svg(self) -> str:
        body = "".join(self.parts)
        return (
            f'<svg class="plot" data-plot="{_esc(self.name)}" xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
            f'font-family="sans-serif" font-size="13">{body}</svg>'
        )


def scatter(name: str, points: list[Point], *, title: str, x_label: str, y_label: str,
            x_range: tuple[float, float], y_range: tuple[float, float]) -> str:
    """Points with vertical error bars; each point's label goes in the legend."""
    frame = _Frame(name, title, x_label, y_label, y_range)
    x_low, x_high = x_range
    if x_high <= x_low:
        x_high = x_low + 1

    def x_of(value: float) -> float:
        return LEFT + frame.plot_w * (value - x_low) / (x_high - x_low)

    for tick in _ticks(x_low, x_high):
        frame.parts.append(
            f'<text x="{x_of(tick):.1f}" y="{TOP + frame.plot_h + 16}" text-anchor="middle" '
            f'font-size="11">{_fmt(tick)}</text>'
        )
    for p in points:
        cx, cy = x_of(p.x), frame.y(p.y)
        if p.y_err:
            top, bottom = frame.y(p.y + p.y_err), frame.y(p.y - p.y_err)
            frame.parts.append(
                f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{top:.1f}" y2="{bottom:.1f}" '
                f'stroke="{p.color}" stroke-width="2"/>'
            )
        frame.parts.append(
            f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="{p.color}">'
            f"<title>{_esc(p.label)}: {p.x:.1f}, {p.y:.1f} ± {p.y_err:.1f}</title></circle>"
        )
    frame.legend([(p.label, p.color) for p in points])
    return frame.svg()


def _quartiles(values: list[float]) -> tuple[float, float, float, float, float]:
    ordered = sorted(values)
    if len(ordered) == 1:
        v = ordered[0]
        return v, v, v, v, v
    q1, median, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return ordered[0], q1, median, q3, ordered[-1]


def box_plot(name: str, categories: list[tuple[str, list[Box]]], *, title: str,
             x_label: str, y_label: str, y_range: tuple[float, float] | None = None) -> str:
    """Side-by-side boxes (min, quartiles, max) per category, one colour per series."""
    values = [v for _, boxes in categories for b in boxes for v in b.values]
    if y_range is None:
        y_range = (min(0.0, *values) if values else 0.0, max(values) if values else 1.0)
    frame = _Frame(name, title, x_label, y_label, y_range)
    slot = frame.plot_w / max(1, len(categories))
    series: dict[str, str] = {}
    for i, (category, boxes) in enumerate(categories):
        x0 = LEFT + i * slot
        frame.parts.append(
            f'<text x="{x0 + slot / 2:.1f}" y="{TOP + frame.plot_h + 16}" '
            f'text-anchor="middle" font-size="11">{_esc(category)}</text>'
        )
        width = slot * 0.8 / max(1, len(boxes))
        for j, box in enumerate(boxes):
            series.setdefault(box.series, box.color)
            if not box.values:
                continue
            low, q1, median, q3, high = _quartiles(box.values)
            left = x0 + slot * 0.1 + j * width
            mid = left + width / 2
            frame.parts.append(
                f'<line x1="{mid:.1f}" x2="{mid:.1f}" y1="{frame.y(high):.1f}" '
                f'y2="{frame.y(low):.1f}" stroke="{box.color}"/>'
                f'<rect class="box" x="{left + 2:.1f}" y="{frame.y(q3):.1f}" '
                f'width="{max(2.0, width - 4):.1f}" '
                f'height="{max(1.5, frame.y(q1) - frame.y(q3)):.1f}" fill="{box.color}" '
                f'fill-opacity="0.45" stroke="{box.color}">'
                f"<title>{_esc(box.series)} {_esc(category)}: n={len(box.values)}, "
                f"median {median:.3g}</title></rect>"
                f'<line x1="{left + 2:.1f}" x2="{left + width - 2:.1f}" '
                f'y1="{frame.y(median):.1f}" y2="{frame.y(median):.1f}" stroke="#222" '
                'stroke-width="2"/>'
            )
    frame.legend(list(series.items()))
    return frame.svg()
