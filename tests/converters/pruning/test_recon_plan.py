"""Widths planned by reconstruction's own error (issue 34), the moments the refit reads, and
feature targets in distillation, on a small inverted-residual net in real torch."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.targets import load_profile


def inverted_residual_net():
    """Two blocks expand 1x1 -> BN -> ReLU -> depthwise 3x3 -> BN -> ReLU -> project 1x1 ->
    BN. Block "a"'s 32 expansion channels are 16 pairs of twins (a twin is rebuilt exactly
    from the other: reconstruction removes half at no error, although each twin's weights
    are as large as any); block "b"'s 32 are all different."""
    import torch
    from torch import nn

    def block(inp: int, mid: int, out: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(inp, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                             nn.Conv2d(mid, mid, 3, padding=1, groups=mid, bias=False),
                             nn.BatchNorm2d(mid), nn.ReLU(),
                             nn.Conv2d(mid, out, 1, bias=False), nn.BatchNorm2d(out))

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), block(16, 32, 16),
                        block(16, 32, 16), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(16, 5)).eval()
    twins = net[2]
    with torch.no_grad():
        for module in (twins[0], twins[3]):
            module.weight[16:] = module.weight[:16]
        for norm in (twins[1], twins[4]):
            for name in ("weight", "bias", "running_mean", "running_var"):
                getattr(norm, name)[16:] = getattr(norm, name)[:16]
    return net


@pytest.fixture(scope="module")
def small():
    import torch

    net = inverted_residual_net()
    data = np.random.default_rng(0).standard_normal((48, 3, 12, 12)).astype(np.float32)
    return net, (torch.from_numpy(data[:1]),), data


def test_twins_cost_nothing_to_reconstruct_and_the_plan_thins_them_first(small):
    from edgekit.converters.pruning import prune_structured
    from edgekit.converters.pruning.recon_plan import measure_reconstruction, plan_by_reconstruction
    from edgekit.converters.pruning.widths import op_seconds_by_module

    net, args, data = small
    profile = load_profile("rpi4")
    groups, dense_s = measure_reconstruction(net, args, [data], profile)
    by_name = {g.name: g for g in groups}
    # groups read by one 1x1 conv: the expansion channels (torch-pruning roots them at the
    # depthwise conv), the stem's (read by "2.0") and block a's output (read by "3.0")
    assert set(by_name) == {"2.3", "3.3", "0", "2.6"}
    twins, plain = by_name["2.3"], by_name["3.3"]
    assert twins.widths() == [32, 24, 16]  # every multiple of 8 down to half
    # measured: twins 1.7e-6 at half width (numerical ridge only), plain block 0.048
    assert twins.error(16) < 1e-4 and plain.error(16) > 0.01
    assert all(a <= b + 1e-12 for a, b in zip(
        [plain.error(w) for w in (32, 24, 16)], [plain.error(w) for w in (24, 16)], strict=False))
    target = op_seconds_by_module(prune_structured(net, args, 0.0, {"2.3": 16})[0], args,
                                  profile)[1]
    plan = plan_by_reconstruction(net, args, [data], profile, target, (groups, dense_s))
    assert plan.widths == {"2.3": 16, "3.3": 32, "0": 16, "2.6": 16}
    assert plan.predicted_latency_s <= target * 1.001


def test_the_refit_error_from_moments_is_the_error_on_the_activations(small):
    """The Gram matrices over every position give the same relative error as the explicit
    activations (BatchNorm-scaled rows), and the refit never does worse than selection."""
    import torch
    from edgekit.converters.pruning import reconstruct as rc

    net, args, data = small
    conv, norm = net[3][6], net[3][7]
    tensors = [torch.from_numpy(data)]
    m = rc._moments(net, net, conv, conv, tensors)
    dense_w = rc._dense_weights(conv, list(range(conv.out_channels)))
    scale = rc.norm_scales(net, args)["3.6"]
    expected = (norm.weight.detach().abs() / torch.sqrt(norm.running_var + norm.eps)).double()
    expected = expected.numpy()
    assert np.allclose(scale, expected)
    kept, weight, path = rc.eliminate_gram(m.h, dense_w @ m.cross.T, 16, dense_w, scale)
    assert len(kept) == 16 and len(path) == 16 and weight.shape == (16, 17)
    found = {}
    handle = conv.register_forward_hook(lambda _m, i, o: found.update(x=i[0], y=o))
    with torch.no_grad():
        net(tensors[0])
    handle.remove()
    x = found["x"].transpose(0, 1).reshape(32, -1).double().numpy()
    y = found["y"].transpose(0, 1).reshape(16, -1).double().numpy()
    got = weight[:, :-1] @ x[kept] + weight[:, -1:]
    direct = rc.relative_error(scale[:, None] * y, scale[:, None] * got)
    idx = [*kept, 32]
    assert rc.fit_error(weight, idx, dense_w, m, scale) == pytest.approx(direct, rel=1e-6)
    assert rc.fit_error(weight, idx, dense_w, m, scale) <= rc.fit_error(
        dense_w[:, idx], idx, dense_w, m, scale)


def test_bn_weighting_keeps_the_channels_the_amplified_output_needs():
    """Output 0 reads channels 0-3 only, output 1 channels 4-7 only; its BatchNorm scales
    output 0 by 100: keeping 4 of 8, the weighted elimination keeps 0-3, the plain one
    (output 1 is larger before the BatchNorm) keeps 4-7."""
    from edgekit.converters.pruning.reconstruct import eliminate_gram

    rng = np.random.default_rng(1)
    x = np.vstack([rng.standard_normal((8, 2000)), np.ones((1, 2000))])
    w = np.zeros((2, 9))
    w[0, :4], w[1, 4:8] = 0.1, 1.0
    h = x @ x.T
    plain, _, _ = eliminate_gram(h, w @ h, 4, w)
    weighted, _, _ = eliminate_gram(h, w @ h, 4, w, np.array([100.0, 1.0]))
    assert plain == [4, 5, 6, 7] and weighted == [0, 1, 2, 3]


def test_feature_targets_pull_the_pruned_block_towards_the_dense_one(small):
    """The feature term alone, through the hooks distillation uses, moves a damaged
    projection's output towards the dense one's."""
    import copy

    import torch
    from edgekit.converters.pruning.distill import _feature_loss, _features

    net, _, data = small
    student = copy.deepcopy(net)
    with torch.no_grad():
        student[3][6].weight.mul_(0.5)  # a damaged projection: its output is off by half
    x = torch.from_numpy(data)
    with torch.no_grad(), _features(net, ["3.6"]) as want:
        net(x)
    scales = {"3.6": float(want["3.6"].var())}
    optimizer = torch.optim.Adam(student[3][6].parameters(), lr=3e-3)
    errors = []
    with _features(student, ["3.6"]) as got:
        for _ in range(20):
            student(x)
            loss = _feature_loss(got, want, scales)
            errors.append(float(loss))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert errors[-1] < 0.5 * errors[0]
