"""Small self-contained SVG charts for the HTML report: bars and a scatter, with axes and
ticks. Every data point is one element of class ``point`` carrying its value in ``data-*``
attributes and a ``<title>`` tooltip, so a browser shows the value on hover and a parser
(the tests) can count and read the points. Written here because no plotting library is in
the build extra and a report must open with no network (no JavaScript charts from a CDN)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from edgekit.ops.svgplot import ticks  # shared with the device's soak plot

WIDTH, HEIGHT = 760, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 56
NAMED_BARS = 12  # more bars than this: names only in tooltips (they would overlap)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str
    color: str = "#3465a4"
    marked: bool = False  # drawn larger, outlined (the chosen candidate)
    category: str = ""  # what the colour stands for (a layer's precision)


class _Frame:
    """Maps data to pixels inside the plot area and draws the axes."""

    def __init__(self, xs: Sequence[float], ys: Sequence[float]) -> None:
        self.xt = ticks(min(xs), max(xs))
        self.yt = ticks(min(ys), max(ys))

    def x(self, value: float) -> float:
        lo, hi = self.xt[0], self.xt[-1]
        return LEFT + (value - lo) / ((hi - lo) or 1.0) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        lo, hi = self.yt[0], self.yt[-1]
        return HEIGHT - BOTTOM - (value - lo) / ((hi - lo) or 1.0) * (HEIGHT - TOP - BOTTOM)

    def axes(self, x_label: str, y_label: str, x_ticks: bool = True) -> list[str]:
        parts = [f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" '
                 f'y2="{HEIGHT - BOTTOM}" stroke="#555"/>',
                 f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#555"/>']
        for t in self.yt:
            py = self.y(t)
            parts.append(f'<line x1="{LEFT}" y1="{py:.1f}" x2="{WIDTH - RIGHT}" y2="{py:.1f}" '
                         f'stroke="#ddd"/><text x="{LEFT - 6}" y="{py + 4:.1f}" '
                         f'text-anchor="end">{t:g}</text>')
        if x_ticks:
            for t in self.xt:
                px = self.x(t)
                parts.append(f'<text x="{px:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                             f'text-anchor="middle">{t:g}</text>')
        parts.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 8}" '
                     f'text-anchor="middle">{escape(x_label)}</text>')
        parts.append(f'<text transform="translate(14,{(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" '
                     f'text-anchor="middle">{escape(y_label)}</text>')
        return parts


def _svg(chart_id: str, title: str, parts: list[str], height: int = HEIGHT) -> str:
    return (f'<svg id="{escape(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
            f'aria-label="{escape(title)}" font-family="sans-serif" font-size="11">'
            f'<title>{escape(title)}</title>{"".join(parts)}</svg>')


def bars(chart_id: str, title: str, points: Sequence[Point], y_label: str) -> str:
    """One bar per point, in order, from the axis (0 when it is in range) to ``y``."""
    frame = _Frame([0.0, max(1.0, len(points))], [0.0, *(p.y for p in points)])
    base = frame.y(max(frame.yt[0], min(0.0, frame.yt[-1])))
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(points))
    parts = frame.axes("layers in graph order", y_label, x_ticks=False)
    named = len(points) <= NAMED_BARS
    for i, p in enumerate(points):
        if named:  # a few layers: each bar named under the axis (the tooltip has it always)
            cx = LEFT + (i + 0.5) * slot
            short = p.label.split(" ")[0][:14]
            parts.append(f'<text x="{cx:.1f}" y="{HEIGHT - BOTTOM + 12}" text-anchor="middle" '
                         f'font-size="9">{escape(short)}</text>')
        top = frame.y(p.y)
        x = LEFT + i * slot + slot * 0.1
        parts.append(f'<rect class="point" data-label="{escape(p.label)}" data-y="{p.y:g}" '
                     f'x="{x:.1f}" y="{min(top, base):.1f}" width="{slot * 0.8:.1f}" '
                     f'height="{max(abs(base - top), 0.5):.1f}" fill="{p.color}">'
                     f'<title>{escape(p.label)}: {p.y:g}</title></rect>')
    return _svg(chart_id, title, parts)


def strip(chart_id: str, title: str, points: Sequence[Point], legend: dict[str, str]) -> str:
    """One cell per point, coloured by category (the precision of each layer), with a legend."""
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(points))
    parts = []
    for i, p in enumerate(points):
        parts.append(f'<rect class="point" data-label="{escape(p.label)}" '
                     f'data-category="{escape(p.category)}" x="{LEFT + i * slot:.1f}" y="{TOP + 20}" '
                     f'width="{max(slot - 1, 0.5):.1f}" height="60" fill="{p.color}">'
                     f'<title>{escape(p.label)}</title></rect>')
    for i, (name, color) in enumerate(legend.items()):
        x = LEFT + i * 110
        parts.append(f'<rect x="{x}" y="{TOP + 100}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{x + 18}" y="{TOP + 110}">{escape(name)}</text>')
    parts.append(f'<text x="{LEFT}" y="{TOP + 12}">layers in graph order</text>')
    return _svg(chart_id, title, parts, height=150)


def scatter(chart_id: str, title: str, points: Sequence[Point], x_label: str, y_label: str,
            line: Sequence[Point] = ()) -> str:
    """Points, and ``line`` joined through them (the front) when given."""
    frame = _Frame([p.x for p in points], [p.y for p in points])
    parts = frame.axes(x_label, y_label)
    if len(line) > 1:
        path = " ".join(f"{frame.x(p.x):.1f},{frame.y(p.y):.1f}" for p in line)
        parts.append(f'<polyline class="front" points="{path}" fill="none" stroke="#c17d11" '
                     'stroke-width="1.5"/>')
    for p in points:
        extra = ' stroke="#000" stroke-width="2"' if p.marked else ""
        parts.append(f'<circle class="point" data-label="{escape(p.label)}" data-x="{p.x:g}" '
                     f'data-y="{p.y:g}" cx="{frame.x(p.x):.1f}" cy="{frame.y(p.y):.1f}" '
                     f'r="{7 if p.marked else 4}" fill="{p.color}"{extra}>'
                     f'<title>{escape(p.label)}: {p.x:g}, {p.y:g}</title></circle>')
    return _svg(chart_id, title, parts)
