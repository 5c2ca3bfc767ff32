"""Confident cells of sigmoid score tables: F1 of the cells above 0.5, int8 against float."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters.metrics import get_metric
from edgekit.converters.metrics.evidence import Evidence


def _tables(rng: np.random.Generator, n: int = 32) -> list[np.ndarray]:
    levels = []
    for anchors in (800, 200):
        table = rng.uniform(0, 0.3, (n, anchors, 10)).astype(np.float32)
        for i in range(n):
            table[i, rng.choice(anchors, 4, replace=False), rng.integers(0, 10, 4)] = 0.8
        levels.append(table)
    return [*levels, rng.normal(0, 3, (n, 800, 32)).astype(np.float32)]  # box logits: not a table


def test_identical_tables_keep_every_cell_and_lost_cells_count() -> None:
    rng = np.random.default_rng(0)
    ref = _tables(rng)
    same = get_metric("cells")(ref, ref)
    assert same.drop == pytest.approx(0.0) and same.details["tables"] == 2.0
    assert same.details["float_cells"] == pytest.approx(32 * 8, abs=8)
    crushed = [ref[0].copy(), ref[1] * 0.5, ref[2]]  # int8 lost the second level's confidence
    result = get_metric("cells")(ref, crushed)
    lost = ref[1] > 0.5
    expected = 100 * lost.sum() / ((ref[0] > 0.5).sum() * 2 + lost.sum())
    assert result.drop == pytest.approx(expected)
    evidence = Evidence.of(result.per_sample)
    assert evidence.low > 20  # the loss is seen with its interval well above a 20-point budget


def test_pages_without_cells_weigh_nothing() -> None:
    ref = np.zeros((4, 100, 5), np.float32)
    ref[0, 3, 1] = 0.9
    got = ref.copy()
    got[0, 3, 1] = 0.4
    result = get_metric("cells")([ref], [got])
    assert result.drop == pytest.approx(100.0)
    assert result.per_sample is not None and result.per_sample.den.tolist() == [1.0, 0.0, 0.0, 0.0]


def test_needs_a_score_table() -> None:
    with pytest.raises(ValueError, match="score tables"):
        get_metric("cells")([np.zeros((4, 10))], [np.zeros((4, 10))])
