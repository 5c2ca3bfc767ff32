"""Fail fast: the search bisects pruning ratios on estimates and stops at the first ratio
that fits the hardware budgets but misses the accuracy budget, naming the lever."""

from __future__ import annotations

import pytest
from edgekit.converters import build
from edgekit.converters.estimate import estimate

from edgekit.errors import BudgetError

from ...conftest import DIGITS_NPZ, DIGITS_ONNX
from ..sizing import TORCH_SOURCE, digits_weights


def test_search_stops_at_the_first_ratio_whose_accuracy_misses(tmp_path):
    dense_ms = estimate(str(DIGITS_ONNX), "rpi4").variants["int8"].latency_s[4] * 1e3
    with pytest.raises(BudgetError) as caught:
        # no distillation and a zero accuracy budget: any pruning loses some digits
        build(TORCH_SOURCE, target="rpi4", weights=str(digits_weights(tmp_path)),
              input_shape=(1, 1, 8, 8), calib=str(DIGITS_NPZ), output=tmp_path / "x.edgekit",
              formats=["onnx"], method="minmax", quiet=True, finetune_steps=0, guard_steps=1,
              budgets={"latency_ms": dense_ms * 0.85, "accuracy_drop": 0.0},
              prune_ratios=[0.0, 0.25, 0.375, 0.5, 0.625, 0.75])
    message = str(caught.value)
    # the dense build (misses latency) and the smallest latency-fitting ratio, nothing more:
    # the four larger ratios were neither built nor estimated one by one
    assert "2 candidate(s) tried" in message
    assert "smallest pruning that fits the hardware budgets (0.25)" in message
    assert "--distill-data" in message and "--max-accuracy-drop" in message
    assert not (tmp_path / "x.edgekit").exists()
