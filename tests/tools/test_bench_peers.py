"""tools/bench_peers.py builds its EfficientNet-Lite-style net (it once broke unseen when a
helper it borrowed from the zoo moved): the net runs and its BatchNorm statistics are not the
identity a fresh module has."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_efficientnet_lite_like_builds_with_realistic_batchnorm() -> None:
    import bench_peers  # tools/, on sys.path via tests/conftest.py

    net = bench_peers.efficientnet_lite_like(num_classes=10)
    with torch.no_grad():
        assert net(torch.zeros(1, 3, 64, 64)).shape == (1, 10)
    norms = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and any(float(m.running_var.mean()) != 1.0 for m in norms)
