"""Detection metric: known boxes give known matches; the YOLO-style decode and NMS."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters.metrics import detection as det


def packed(boxes_xywh: list[list[float]], scores: list[list[float]]) -> np.ndarray:
    """One image's [1, 4 + classes, anchors] from per-anchor boxes and class scores, padded
    with empty anchors (score 0): real heads have many more anchors than channels."""
    out = np.concatenate([np.asarray(boxes_xywh, np.float32).T, np.asarray(scores, np.float32).T])
    return np.pad(out, ((0, 0), (0, 16 - out.shape[1])))[None]


def test_iou_of_known_boxes() -> None:
    a = np.array([[0, 0, 10, 10]])
    b = np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30]])
    assert det.iou_matrix(a, b) == pytest.approx(np.array([[1.0, 50 / 150, 0.0]]))


def test_decode_thresholds_and_suppresses_per_class() -> None:
    out = packed([[50, 50, 20, 20], [51, 50, 20, 20], [51, 50, 20, 20], [10, 10, 8, 8]],
                 [[0.9, 0.0], [0.8, 0.0], [0.0, 0.7], [0.1, 0.2]])
    (found,) = det.decode_packed(out, conf=0.25)
    # anchor 1 overlaps anchor 0 of the same class: suppressed; anchor 2 is another class: kept;
    # anchor 3 is under the confidence threshold
    assert found.classes.tolist() == [0, 1]
    assert found.scores.tolist() == pytest.approx([0.9, 0.7])
    assert found.boxes[0].tolist() == pytest.approx([40, 40, 60, 60])


def test_decode_accepts_anchors_first_layout() -> None:
    out = packed([[50, 50, 20, 20]] * 6, [[0.9, 0.0]] * 6)  # [1, 6, 16]
    assert len(det.decode_packed(out)[0].boxes) == len(det.decode_packed(out.transpose(0, 2, 1))[0].boxes) == 1


def test_known_boxes_give_known_matches() -> None:
    truth = det.Detections(det.xywh_to_xyxy(np.array([[50, 50, 20, 20], [100, 100, 20, 20], [10, 10, 10, 10]])),
                           np.ones(3), np.array([0, 1, 2]))
    candidate = det.Detections(
        det.xywh_to_xyxy(np.array([[52, 50, 20, 20],     # IoU 0.82, same class: match
                                   [100, 100, 20, 20],   # exact box, wrong class: no match
                                   [16, 10, 10, 10],     # same class, IoU 0.25: no match
                                   [51, 50, 20, 20]])),  # duplicate of the first truth: no second match
        np.array([0.9, 0.8, 0.7, 0.6]), np.array([0, 2, 2, 0]))
    assert det.match(truth, candidate) == 1
    result = det.match_all([truth], [candidate])
    assert (result.recall, result.precision) == (pytest.approx(1 / 3), pytest.approx(1 / 4))


def test_metric_against_float_and_labels() -> None:
    float_out = packed([[50, 50, 20, 20], [100, 100, 20, 20], [0, 0, 1, 1]],
                       [[0.9, 0.0], [0.0, 0.8], [0.0, 0.0]])
    int8_out = float_out.copy()
    int8_out[0, 4:, 1] = 0.0  # int8 lost the second detection's score
    result = det.detection([float_out], [int8_out])
    assert result.score == pytest.approx(0.5) and result.drop == pytest.approx(50.0)
    labels = ([np.array([[50, 50, 20, 20], [100, 100, 20, 20]])], [np.array([0, 1])])
    with_labels = det.detection([float_out], [int8_out], labels)
    assert with_labels.float_score == pytest.approx(1.0) and with_labels.score == pytest.approx(0.5)


def test_postprocess_hook_replaces_the_decode() -> None:
    def two_boxes(outputs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return [(row.reshape(-1, 4), np.ones(len(row) // 4), np.zeros(len(row) // 4)) for row in outputs[0]]

    ref = np.array([[0, 0, 10, 10, 20, 20, 30, 30]], np.float32)
    got = np.array([[0, 0, 10, 10, 50, 50, 60, 60]], np.float32)
    assert det.detection([ref], [got], postprocess=two_boxes).score == pytest.approx(0.5)


def test_decode_refuses_a_non_packed_shape() -> None:
    with pytest.raises(ValueError, match=r"4 \+ classes"):
        det.decode_packed(np.zeros((2, 10)))
