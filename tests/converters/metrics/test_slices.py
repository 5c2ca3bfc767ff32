"""Per-slice validation: the slice int8 ruined is the worst one, with its decisions changed."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters.metrics import slices


def quantize(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """One uint8 grid over low..high, as a per-tensor quantizer would apply it."""
    step = (high - low) / 255
    return (np.clip(np.round((x - low) / step), 0, 255) * step + low).astype(np.float32)


def test_axis_rule() -> None:
    assert slices.slice_axis((8, 10)) == 1
    assert slices.slice_axis((8, 14, 256)) == 1   # YOLO [N, 4 + classes, anchors]
    assert slices.slice_axis((8, 40, 11)) == 2    # CTC [N, T, symbols]
    assert slices.slice_axis((8, 16, 7, 7)) == 1  # NCHW
    with pytest.raises(ValueError):
        slices.slice_axis((8,))


def test_worst_slice_is_the_scores_one_grid_ruined() -> None:
    rng = np.random.default_rng(0)
    ref = np.concatenate([rng.uniform(0, 320, (16, 4, 64)), rng.uniform(0, 1, (16, 10, 64))], 1).astype(np.float32)
    got = quantize(ref, 0.0, 320.0)
    report = slices.validate_output(ref, got, "output0")
    assert [(s.start, s.stop) for s in report.slices] == [(0, 4), (4, 14)]
    boxes, scores = report.slices
    assert boxes.sqnr_db > 40 and scores.sqnr_db < 10
    assert report.worst is scores
    assert scores.decision == "argmax" and scores.decisions_changed > 0.5
    assert report.sqnr_db > 40  # the whole output looks fine: the reason slices exist
    name, worst = slices.worst_slice([report, slices.validate_output(ref[:, :4], ref[:, :4], "other")])
    assert name == "output0" and worst is scores


def test_single_channel_decisions_use_a_threshold() -> None:
    ref = np.array([[0.2], [0.6], [0.45], [0.9]], np.float32)
    got = np.array([[0.2], [0.4], [0.55], [0.9]], np.float32)
    (only,) = slices.validate_output(ref, got).slices
    assert only.decision == "threshold 0.5" and only.decisions_changed == pytest.approx(0.5)
