"""A standalone SVG chart of series over time with two y axes (the soak benchmark's plot).

No plotting library is on a device, and the file must open anywhere with no network:
plain SVG, one ``<polyline>`` per series, points as ``<circle class="point">`` carrying
their values in ``data-*`` attributes and a ``<title>`` tooltip (a browser shows them on
hover; a parser, the tests, reads them). ``ticks`` is shared with the host's HTML report
(``converters/report/svg.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 860, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 64, 40, 48


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 5 x 10^k steps)."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0]
    if high <= low:
        high = low + 1.0
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    start = math.floor(low / step) * step
    return [round(start + i * step, 10) for i in range(int(math.ceil((high - start) / step)) + 1)]


@dataclass(frozen=True)
class Series:
    name: str
    ys: tuple[float | None, ...]  # None: no value at that x (a gap)
    color: str
    right: bool = False  # on the right axis
    dashed: bool = False


def _scale(values: Sequence[float], size: float, offset: float, flip: bool
           ) -> tuple[list[float], Callable[[float], float]]:
    marks = ticks(min(values), max(values)) if values else [0.0, 1.0]
    lo, hi = marks[0], marks[-1]

    def at(v: float) -> float:
        share = (v - lo) / ((hi - lo) or 1.0)
        return offset + (size - share * size if flip else share * size)

    return marks, at


def time_chart(title: str, xs: Sequence[float], series: Sequence[Series], x_label: str,
               left_label: str, right_label: str, marker: float | None = None,
               marker_label: str = "") -> str:
    """The chart as an SVG document; ``marker``: a vertical line at that x (labelled)."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    xt, x_at = _scale(list(xs) or [0.0], plot_w, LEFT, flip=False)
    sides = {}
    for right in (False, True):
        values = [v for s in series if s.right == right for v in s.ys if v is not None]
        sides[right] = _scale(values or [0.0, 1.0], plot_h, TOP, flip=True)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
             f"<title>{escape(title)}</title>",
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
             f'<text x="{LEFT}" y="20" font-size="14">{escape(title)}</text>']
    bottom = TOP + plot_h
    parts.append(f'<line x1="{LEFT}" y1="{bottom}" x2="{LEFT + plot_w}" y2="{bottom}" '
                 'stroke="#555"/>')
    for x in xt:
        px = x_at(x)
        parts.append(f'<line x1="{px:.1f}" y1="{bottom}" x2="{px:.1f}" y2="{bottom + 4}" '
                     f'stroke="#555"/><text x="{px:.1f}" y="{bottom + 17}" '
                     f'text-anchor="middle">{x:g}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 8}" text-anchor="middle">'
                 f"{escape(x_label)}</text>")
    for right, label in ((False, left_label), (True, right_label)):
        marks, y_at = sides[right]
        ax = LEFT + plot_w if right else LEFT
        tick = 4 if right else -4
        parts.append(f'<line x1="{ax}" y1="{TOP}" x2="{ax}" y2="{bottom}" stroke="#555"/>')
        for y in marks:
            py = y_at(y)
            parts.append(f'<line x1="{ax}" y1="{py:.1f}" x2="{ax + tick}" y2="{py:.1f}" '
                         f'stroke="#555"/><text x="{ax + 3 * tick:.1f}" y="{py + 4:.1f}" '
                         f'text-anchor="{"start" if right else "end"}">{y:g}</text>')
            if not right:
                parts.append(f'<line x1="{LEFT}" y1="{py:.1f}" x2="{LEFT + plot_w}" '
                             f'y2="{py:.1f}" stroke="#eee"/>')
        lx = ax + (48 if right else -48)
        parts.append(f'<text transform="translate({lx},{TOP + plot_h / 2}) rotate(-90)" '
                     f'text-anchor="middle">{escape(label)}</text>')
    if marker is not None:
        px = x_at(marker)
        parts.append(f'<line class="marker" x1="{px:.1f}" y1="{TOP}" x2="{px:.1f}" '
                     f'y2="{bottom}" stroke="#cc0000" stroke-dasharray="4 3"/>'
                     f'<text x="{px + 4:.1f}" y="{TOP + 12}" fill="#cc0000">'
                     f"{escape(marker_label)}</text>")
    for i, s in enumerate(series):
        _, y_at = sides[s.right]
        points = [(x_at(x), y_at(y), x, y) for x, y in zip(xs, s.ys, strict=True)
                  if y is not None]
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        if points:
            line = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in points)
            parts.append(f'<polyline fill="none" stroke="{s.color}" stroke-width="1.5"{dash} '
                         f'points="{line}"/>')
        for px, py, x, y in points:
            parts.append(f'<circle class="point" cx="{px:.1f}" cy="{py:.1f}" r="2.5" '
                         f'fill="{s.color}" data-series="{escape(s.name)}" data-x="{x:g}" '
                         f'data-y="{y:g}"><title>{escape(s.name)} at {x:g}: {y:g}</title>'
                         "</circle>")
        ly = TOP - 8
        lx = LEFT + 260 + 110 * i
        parts.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 18}" y2="{ly - 4}" '
                     f'stroke="{s.color}" stroke-width="2"{dash}/><text x="{lx + 22}" '
                     f'y="{ly}">{escape(s.name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
