"""The accuracy/latency front of a set of candidates (the search's, in the report)."""

from __future__ import annotations

from collections.abc import Sequence


def front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (lower is better on each),
    ordered by the first axis: the accuracy/latency front."""
    order = sorted(range(len(points)), key=lambda i: points[i])
    kept: list[int] = []
    for i in order:
        if not kept or points[i][1] < points[kept[-1]][1]:
            kept.append(i)
    return kept
