"""tools/benchmarks/bench_runtime_power.py: the mains p95 ratio comes with an interval from resampling
whole slices, wide when slices disagree and tight when they agree."""

from __future__ import annotations

import numpy as np
import pytest


def slices(rng: np.random.Generator, spread: float) -> list[list[float]]:
    """Eight slices of 200 latencies, each slice shifted by its own disturbance."""
    return [list(0.5 + rng.normal(0, spread) + rng.exponential(0.05, 200)) for _ in range(8)]


def test_the_p95_ratio_interval_follows_the_slices_noise() -> None:
    from tools.benchmarks import bench_runtime_power

    rng = np.random.default_rng(0)
    a, b = slices(rng, 0.0), slices(rng, 0.0)
    ratio, lo, hi = bench_runtime_power.p95_ratio(a, b)
    pooled = np.percentile(np.concatenate(a), 95) / np.percentile(np.concatenate(b), 95)
    assert ratio == pytest.approx(pooled, rel=1e-12) and lo <= ratio <= hi and hi - lo < 0.05
    _, lo_noisy, hi_noisy = bench_runtime_power.p95_ratio(slices(rng, 0.1), slices(rng, 0.1))
    assert hi_noisy - lo_noisy > 2 * (hi - lo)
