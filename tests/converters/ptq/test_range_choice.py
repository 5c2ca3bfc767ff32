"""Per-tensor range choice: a clipped range for a tensor with an outlier, the full range otherwise."""

from __future__ import annotations

import numpy as np
from edgekit.converters.ptq.range_choice import choose


def test_an_outlier_makes_the_percentile_range_win() -> None:
    # one value in a million at 1000 sigma: the full range would give everything else 4 levels
    values = np.append(np.random.default_rng(0).normal(size=1_000_000), 1000.0)
    best, errors = choose(values, {"minmax": (float(values.min()), 1000.0), "percentile": (-4.0, 4.0)},
                          symmetric=False)
    assert best == "percentile"
    assert errors["percentile"] < errors["minmax"]


def test_a_range_that_clips_the_signal_loses_to_minmax() -> None:
    values = np.random.default_rng(1).uniform(-1, 1, size=20000)
    best, _ = choose(values, {"minmax": (-1.0, 1.0), "percentile": (-0.5, 0.5)}, symmetric=True)
    assert best == "minmax"
