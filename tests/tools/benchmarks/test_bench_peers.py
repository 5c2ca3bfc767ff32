"""tools/benchmarks/bench_peers.py builds its EfficientNet-Lite-style net (it once broke unseen when a
helper it borrowed from the zoo moved): the net runs and its BatchNorm statistics are not the
identity a fresh module has; its verdicts tell a tie within the run's noise from a miss."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def test_efficientnet_lite_like_builds_with_realistic_batchnorm() -> None:
    from tools.benchmarks import bench_peers

    net = bench_peers.efficientnet_lite_like(num_classes=10)
    with torch.no_grad():
        assert net(torch.zeros(1, 3, 64, 64)).shape == (1, 10)
    norms = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and any(float(m.running_var.mean()) != 1.0 for m in norms)


def test_a_ratio_whose_interval_holds_the_bar_is_called_a_tie() -> None:
    from tools.benchmarks import common  # the paired-ratio helpers bench_peers prints with

    rng = np.random.default_rng(0)
    tied = 1.0 + rng.normal(0, 0.02, 20)  # per-block ratios scattered around the bar
    missed = 0.9 + rng.normal(0, 0.002, 20)
    lo, hi = common.median_ci(tied)
    assert lo < np.median(tied) < hi and lo < 1.0 < hi
    r = {"ratio": float(np.median(tied)), "ci": (lo, hi)}
    assert common.verdict(r["ratio"] >= 1.0, r, 1.0).endswith("(tie)")
    r = {"ratio": float(np.median(missed)), "ci": common.median_ci(missed)}
    assert common.verdict(False, r, 1.0) == "FAIL"
    assert common.ratio_text({"ratio": 0.99996, "ci": (0.98, 1.01)}).startswith("1.0000")
