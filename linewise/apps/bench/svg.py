"""Small inline-SVG charts for the HTML report: a scatter with error bars and box plots.

Hand-written rather than matplotlib: the report must be one self-contained file that
opens anywhere, the charts are simple, and the runtime should not pull a plotting stack.
Every chart is an ``<svg class="plot">`` with a title, axes, ticks and a legend.

Every mark stays inside its chart: data are drawn in the frame inset by ``INSET``
pixels, so a point on an axis is whole; the value range grows to hold every value
(a negative reduction, a whisker past the top); an error bar is clipped to the range
its quantity can have (a rate within 0–100 %); legend labels are cut to the legend's
width, with the whole label in their tooltip.
"""

from __future__ import annotations

import html
import math
import statistics
from dataclasses import dataclass

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")

WIDTH, HEIGHT = 560, 340
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 36, 56
INSET = 10
"""Pixels between the frame and the nearest data: a point of radius 6 on an axis is whole."""
POINT_RADIUS = 6
LEGEND_CHARS = 16
"""Characters of a legend label that fit beside its swatch (12 px sans-serif)."""
LEGEND_ROWS = (HEIGHT - TOP - 8) // 18


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


def axis_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round ticks (steps of 1, 2, 2.5 or 5 times a power of ten) from at or below ``low`` to
    at or above ``high``: the axis then spans whole ticks."""
    if high <= low:
        high = low + 1
    rough = (high - low) / count
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= rough)
    first = math.floor(low / step + 1e-9) * step
    ticks = [first]
    while ticks[-1] < high - 1e-9:
        ticks.append(round(first + len(ticks) * step, 9))
    return ticks


def tick_label(value: float) -> str:
    """A tick label: short, and exact for the round values ``axis_ticks`` makes (12500 is
    "12.5k", not "12k")."""
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.4g}M"
    if abs(value) >= 1000:
        return f"{value / 1000:.4g}k"
    return f"{value:.4g}"


class _Frame:
    """Axes and scales shared by both chart kinds."""

    def __init__(self, name: str, title: str, x_label: str, y_label: str,
                 y_range: tuple[float, float]) -> None:
        self.name = name
        self.parts: list[str] = []
        self.y_ticks = axis_ticks(*y_range)
        self.y_low, self.y_high = self.y_ticks[0], self.y_ticks[-1]
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
        for tick in self.y_ticks:
            y = self.y(tick)
            self.parts.append(
                f'<line x1="{LEFT}" x2="{LEFT + self.plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
                'stroke="#e5e5e5"/>'
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
                f'font-size="11">{tick_label(tick)}</text>'
            )
        self.parts.append(
            f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{self.plot_w}" '
            f'height="{self.plot_h}" fill="none" stroke="#444"/>'
        )

    def y(self, value: float) -> float:
        share = (value - self.y_low) / (self.y_high - self.y_low)
        return TOP + INSET + (self.plot_h - 2 * INSET) * (1 - share)

    def clip_y(self, value: float) -> float:
        """``value`` held to the chart's range (an error bar past what can be)."""
        return min(self.y_high, max(self.y_low, value))

    def legend(self, entries: list[tuple[str, str]]) -> None:
        shown = entries if len(entries) <= LEGEND_ROWS else entries[:LEGEND_ROWS - 1]
        x = WIDTH - RIGHT + 12
        for i, (label, color) in enumerate(shown):
            y = TOP + 8 + i * 18
            text = label if len(label) <= LEGEND_CHARS else label[:LEGEND_CHARS - 1] + "…"
            self.parts.append(
                f'<g class="legend"><title>{_esc(label)}</title>'
                f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{color}"/>'
                f'<text x="{x + 16}" y="{y}" font-size="12">{_esc(text)}</text></g>'
            )
        if len(shown) < len(entries):
            y = TOP + 8 + len(shown) * 18
            self.parts.append(f'<text class="legend" x="{x}" y="{y}" font-size="12">'
                              f"+{len(entries) - len(shown)} more</text>")

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
    x_ticks = axis_ticks(min([x_range[0], *(p.x for p in points)]),
                     max([x_range[1], *(p.x for p in points)]))
    x_low, x_high = x_ticks[0], x_ticks[-1]

    def x_of(value: float) -> float:
        return LEFT + INSET + (frame.plot_w - 2 * INSET) * (value - x_low) / (x_high - x_low)

    for tick in x_ticks:
        frame.parts.append(
            f'<text x="{x_of(tick):.1f}" y="{TOP + frame.plot_h + 16}" text-anchor="middle" '
            f'font-size="11">{tick_label(tick)}</text>'
        )
    for p in points:
        cx, cy = x_of(p.x), frame.y(frame.clip_y(p.y))
        if p.y_err:
            top = frame.y(frame.clip_y(p.y + p.y_err))
            bottom = frame.y(frame.clip_y(p.y - p.y_err))
            frame.parts.append(
                f'<line class="error-bar" x1="{cx:.1f}" x2="{cx:.1f}" y1="{top:.1f}" '
                f'y2="{bottom:.1f}" stroke="{p.color}" stroke-width="2"/>'
            )
        frame.parts.append(
            f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="{POINT_RADIUS}" '
            f'fill="{p.color}">'
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
             x_label: str, y_label: str, y_range: tuple[float, float] | None = None,
             counts: bool = False) -> str:
    """Side-by-side boxes (min, quartiles, max) per category, one colour per series;
    ``counts``: each box's number of values under it (``n=12``), between the category
    and the axis title, so that a box of 2 does not read like a box of 200."""
    values = [v for _, boxes in categories for b in boxes for v in b.values]
    expected = y_range if y_range is not None else (0.0, max(values, default=1.0))
    # A value outside the expected range (a filter that grew the page: a negative
    # reduction) widens it, so its whisker stays on the chart.
    y_range = (min([expected[0], *values]), max([expected[1], *values]))
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
                f'<line class="whisker" x1="{mid:.1f}" x2="{mid:.1f}" y1="{frame.y(high):.1f}" '
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
            if counts:
                frame.parts.append(
                    f'<text class="count" x="{mid:.1f}" y="{TOP + frame.plot_h + 29}" '
                    f'text-anchor="middle" font-size="10" fill="{box.color}">'
                    f"n={len(box.values)}</text>"
                )
    frame.legend(list(series.items()))
    return frame.svg()
