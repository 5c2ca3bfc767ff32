"""Per-output, per-slice validation: the worst slice, not one cosine over everything.

Slices are groups of channels along the output's **channel axis**, chosen by ``slice_axis``:

* rank 2 ``[N, C]``: axis 1 (classes);
* rank 3 ``[N, a, b]``: the smaller of a and b — YOLO ``[N, 4 + classes, anchors]`` gives
  axis 1, CTC ``[N, T, symbols]`` gives axis 2 (a sequence is longer than its alphabet is
  not guaranteed, so callers who know better pass ``axis``);
* rank 4 and up: axis 1 (NCHW, the layout of the graphs edgekit quantizes; the manifest's
  NHWC outputs are transposed back by the backends).

Channels are grouped where their float value spans stay within ``GROUP_RATIO`` of each
other, contiguously (a Concat of branches is contiguous): box coordinates (0..128) and
class scores (0..1) side by side become two slices. Per slice: float range, SQNR in dB, and
the share of decisions int8 changed — argmax over the slice's channels when it has several,
otherwise the crossing of a threshold (0.5 for 0..1 data, 0 for signed data, else the float
median).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .base import Outputs
from .sqnr import sqnr_db

GROUP_RATIO = 4.0


@dataclass(frozen=True)
class SliceStats:
    start: int                # channels [start, stop) along the report's axis
    stop: int
    low: float                # float range of the slice
    high: float
    sqnr_db: float
    decisions_changed: float  # share of positions whose decision differs int8 vs float
    decision: str             # "argmax" or "threshold <t>"


@dataclass(frozen=True)
class OutputReport:
    name: str
    axis: int
    sqnr_db: float                  # the whole output
    slices: tuple[SliceStats, ...]

    @property
    def worst(self) -> SliceStats:
        return min(self.slices, key=lambda s: (s.sqnr_db, -s.decisions_changed))


def slice_axis(shape: Sequence[int]) -> int:
    if len(shape) < 2:
        raise ValueError(f"per-slice validation needs [N, channels, ...]; got shape {tuple(shape)}")
    if len(shape) == 3:
        return 1 if shape[1] <= shape[2] else 2
    return 1


def channels_last(array: np.ndarray, axis: int) -> np.ndarray:
    """``[positions, channels]``: every axis but ``axis`` flattened into positions."""
    return np.moveaxis(np.asarray(array, np.float64), axis, -1).reshape(-1, array.shape[axis])


def channel_groups(reference: np.ndarray, axis: int, ratio: float = GROUP_RATIO) -> list[tuple[int, int]]:
    """Contiguous channel ranges whose float spans stay within ``ratio`` of each other."""
    flat = channels_last(reference, axis)
    spans = flat.max(0) - flat.min(0)
    groups: list[tuple[int, int]] = []
    start, low, high = 0, np.inf, 0.0
    for c, span in enumerate(spans):
        if span <= 0:  # a constant channel fits any grid: never a reason to split
            continue
        new_low, new_high = min(low, span), max(high, span)
        if high > 0 and new_high / new_low > ratio:
            groups.append((start, c))
            start, new_low, new_high = c, span, span
        low, high = new_low, new_high
    groups.append((start, len(spans)))
    return groups


def decisions_changed(ref: np.ndarray, got: np.ndarray) -> tuple[float, str]:
    """Share of positions (rows of ``[positions, channels]``) whose decision changed."""
    if ref.shape[1] > 1:
        return float((ref.argmax(1) != got.argmax(1)).mean()), "argmax"
    if ref.min() >= 0 and ref.max() <= 1:
        threshold = 0.5
    elif ref.min() < 0 < ref.max():
        threshold = 0.0
    else:
        threshold = float(np.median(ref))
    return float(((ref > threshold) != (got > threshold)).mean()), f"threshold {threshold:.4g}"


def validate_output(reference: np.ndarray, candidate: np.ndarray, name: str = "output0",
                    axis: int | None = None) -> OutputReport:
    reference, candidate = np.asarray(reference), np.asarray(candidate)
    if reference.shape != candidate.shape:
        raise ValueError(f"output {name}: float {reference.shape} vs int8 {candidate.shape}")
    axis = slice_axis(reference.shape) if axis is None else axis
    ref, got = channels_last(reference, axis), channels_last(candidate, axis)
    slices = []
    for start, stop in channel_groups(reference, axis):
        r, g = ref[:, start:stop], got[:, start:stop]
        changed, rule = decisions_changed(r, g)
        slices.append(SliceStats(start, stop, float(r.min()), float(r.max()), sqnr_db(r, g), changed, rule))
    return OutputReport(name, axis, sqnr_db(reference, candidate), tuple(slices))


def validate_outputs(reference: Outputs, candidate: Outputs,
                     names: Sequence[str] | None = None) -> tuple[OutputReport, ...]:
    names = list(names) if names is not None else [f"output{i}" for i in range(len(reference))]
    return tuple(validate_output(r, c, n) for r, c, n in zip(reference, candidate, names, strict=True))


def worst_slice(reports: Sequence[OutputReport]) -> tuple[str, SliceStats]:
    """The output name and slice with the lowest SQNR over all outputs (for summary/manifest)."""
    name, stats = min(((r.name, r.worst) for r in reports), key=lambda item: item[1].sqnr_db)
    return name, stats
