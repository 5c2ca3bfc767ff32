"""Sensitivity-aware widths: a group whose channels all matter is measured as fragile and
the greedy plan thins the redundant group first."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.targets import load_profile


def fragile_and_redundant_net():
    """conv "0" (24 ch, every channel carries signal) -> conv "2" (24 ch, 16 of them near
    zero) -> pooled linear head. Removing channels of "0" hurts; of "2", almost not."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 24, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(24, 24, 3, padding=1), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, 5)).eval()
    with torch.no_grad():
        net[2].weight[8:] *= 1e-3  # 16 output channels of the second conv barely matter
        net[2].bias[8:] = 0.0
    return net


@pytest.fixture(scope="module")
def measured():
    import torch
    from edgekit.converters.pruning.widths import measure_groups

    net = fragile_and_redundant_net()
    data = np.random.default_rng(0).standard_normal((32, 3, 16, 16)).astype(np.float32)
    groups, dense_s = measure_groups(net, (torch.from_numpy(data[:1]),), [data],
                                     load_profile("rpi4"))
    return net, {g.name: g for g in groups}, dense_s


def test_the_fragile_group_measures_more_error_than_the_redundant_one(measured):
    _, groups, dense_s = measured
    assert set(groups) == {"0", "2"} and dense_s > 0
    fragile, redundant = groups["0"], groups["2"]
    assert fragile.latency_s > 0 and redundant.latency_s > 0  # both charged estimator time
    # half the channels: every one of "0"'s carries signal, "2"'s lowest 12 are ~zero
    assert fragile.error(8) > 0.05
    assert redundant.error(8) < fragile.error(8) / 20


def test_greedy_plan_thins_the_redundant_group_and_keeps_widths_multiples_of_8(measured):
    import torch
    from edgekit.converters.pruning import prune_structured
    from edgekit.converters.pruning.widths import plan_widths

    net, groups, dense_s = measured
    plan = plan_widths(list(groups.values()), dense_s, dense_s * 0.85)
    assert plan.reachable and plan.predicted_latency_s <= dense_s * 0.85
    assert plan.widths["2"] < 24 and plan.widths["0"] == 24
    assert all(w % 8 == 0 for w in plan.widths.values())
    pruned, report = prune_structured(net, (torch.zeros(1, 3, 16, 16),), 0.0, plan.widths)
    assert report.widths == "sensitivity"
    assert report.channels["2"] == [24, plan.widths["2"]] and report.channels["0"] == [24, 24]
    assert pruned[2].out_channels == plan.widths["2"] and net[2].out_channels == 24
