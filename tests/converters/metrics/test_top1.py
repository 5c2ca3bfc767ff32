"""Top-1 metric: accuracy with labels, agreement without."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters.metrics import top1


def test_agreement_and_accuracy() -> None:
    ref = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    got = np.array([[0.8, 0.2], [0.6, 0.4], [0.6, 0.4], [0.3, 0.7]])
    agreement = top1.top1([ref], [got])
    assert agreement.score == pytest.approx(0.75) and agreement.drop == pytest.approx(25.0)
    labelled = top1.top1([ref], [got], np.array([0, 1, 1, 1]))
    assert labelled.float_score == pytest.approx(0.75)
    assert labelled.score == pytest.approx(0.5) and labelled.drop == pytest.approx(25.0)


def test_refuses_a_single_score() -> None:
    with pytest.raises(ValueError, match="classes >= 2"):
        top1.top1([np.zeros((4, 1))], [np.zeros((4, 1))])


def test_refuses_mismatched_outputs() -> None:
    with pytest.raises(ValueError, match="same shapes"):
        top1.top1([np.zeros((4, 3))], [np.zeros((4, 2))])


def test_integer_labels_are_the_decisions() -> None:
    """skl2onnx's ``label`` output [N] int64: compared as is (an argmax over [N] would be one
    number for the whole batch)."""
    ref = np.array([3, 1, 4, 1, 5], np.int64)
    got = np.array([3, 1, 4, 2, 5], np.int64)
    agreement = top1.top1([ref], [got])
    assert agreement.score == pytest.approx(0.8) and agreement.drop == pytest.approx(20.0)
    assert agreement.per_sample is not None and agreement.per_sample.kind == "decisions"
    labelled = top1.top1([ref], [got], np.array([3, 1, 4, 2, 0]))
    assert labelled.float_score == pytest.approx(0.6) and labelled.score == pytest.approx(0.8)
    assert labelled.drop == pytest.approx(-20.0)
    column = top1.top1([ref.reshape(-1, 1)], [got.reshape(-1, 1)])  # [N, 1] labels too
    assert column.drop == pytest.approx(20.0)
