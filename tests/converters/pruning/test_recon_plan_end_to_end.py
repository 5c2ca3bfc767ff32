"""The reconstruction plan in the model output's currency (issue 34): two identical
inverted-residual branches whose outputs the model scales by 10 and by 0.1. Each branch's
consumer rebuilds its own output equally well, so the local curves cannot choose; the
output's error can, and the plan must thin the branch the output barely reads."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.targets import load_profile


def two_branch_net():
    import torch
    from torch import nn

    def block() -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(16, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                             nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False),
                             nn.BatchNorm2d(32), nn.ReLU(),
                             nn.Conv2d(32, 16, 1, bias=False), nn.BatchNorm2d(16))

    class TwoBranch(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU())
            self.a, self.b = block(), block()
            self.b.load_state_dict(self.a.state_dict())  # the same branch twice
            self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
            self.head_a, self.head_b = nn.Linear(16, 5), nn.Linear(16, 5)
            self.head_b.load_state_dict(self.head_a.state_dict())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.stem(x)
            return torch.cat([10.0 * self.head_a(self.pool(self.a(x))),
                              0.1 * self.head_b(self.pool(self.b(x)))], 1)

    torch.manual_seed(0)
    return TwoBranch().eval()


@pytest.fixture(scope="module")
def branches():
    import torch

    net = two_branch_net()
    data = np.random.default_rng(0).standard_normal((48, 3, 12, 12)).astype(np.float32)
    return net, (torch.from_numpy(data[:1]),), data


def test_the_end_to_end_plan_thins_the_branch_the_output_barely_reads(branches):
    from edgekit.converters.pruning import prune_structured
    from edgekit.converters.pruning.recon_plan import (
        measure_reconstruction,
        plan_by_reconstruction,
        probe_width,
    )
    from edgekit.converters.pruning.widths import _outputs, op_seconds_by_module, output_error

    net, args, data = branches
    profile = load_profile("rpi4")
    local, dense_s = measure_reconstruction(net, args, [data], profile)
    by_name = {g.name: g for g in local}
    assert {"a.3", "b.3"} <= set(by_name)
    # the consumers' own errors are the same: the local plan has nothing to choose by
    assert by_name["a.3"].errors == pytest.approx(by_name["b.3"].errors)
    assert by_name["a.3"].error(16) > 1e-3

    groups, _ = measure_reconstruction(net, args, [data], profile, end_to_end=True)
    by_name = {g.name: g for g in groups}
    a, b = by_name["a.3"], by_name["b.3"]
    probe = probe_width(a)
    assert probe == 24 and a.end_to_end[0] == 24
    # the curve at the probe is the output's error with that group alone cut and refit
    alone, _ = prune_structured(net, args, 0.0, {"a.3": 24}, calib=[data])
    tensors = [__import__("torch").from_numpy(data[:64])]
    measured = output_error(_outputs(alone, tensors), _outputs(net, tensors))
    assert a.error(24) == pytest.approx(measured, rel=1e-3)
    # both halves of the output count by their own variance: branch b's cut still shows,
    # but far less than branch a's (10 x vs 0.1 x the same features)
    assert a.error(16) > 10 * b.error(16)

    target = op_seconds_by_module(prune_structured(net, args, 0.0, {"b.3": 16})[0], args,
                                  profile)[1]
    plan = plan_by_reconstruction(net, args, [data], profile, target, (groups, dense_s))
    assert plan.widths["b.3"] == 16 and plan.widths["a.3"] == 32
    # the local curves tie and split the cut: the amplified branch pays half (both to 24)
    local_plan = plan_by_reconstruction(net, args, [data], profile, target, (local, dense_s))
    assert local_plan.widths["a.3"] < 32
