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
