"""The default metric follows the outputs' shapes and values, and says why."""

from __future__ import annotations

import numpy as np
from edgekit.converters.metrics import choose_default


def test_choices() -> None:
    rng = np.random.default_rng(0)
    yolo = np.concatenate([rng.uniform(0, 128, (4, 4, 256)), rng.uniform(0, 1, (4, 10, 256))], 1)
    assert choose_default([yolo]).name == "detection"
    assert "YOLO" in choose_default([yolo]).reason
    classes = choose_default([rng.normal(size=(4, 10))], has_labels=True)
    assert classes.name == "top1" and "labels" in classes.reason
    assert choose_default([rng.normal(size=(4, 40, 11))]).name == "ctc"
    # [N, 14, 256] logits, not probabilities: not mistaken for a detector
    assert choose_default([rng.normal(0, 5, (4, 14, 256))]).name == "ctc"
    assert choose_default([rng.normal(size=(4, 1))]).name == "sqnr"
    assert choose_default([rng.normal(size=(4, 3, 8, 8))]).name == "sqnr"
