"""Sensitivity with BatchNorm re-estimated under each mask, and distillation's partial
augmentation: the dense model is left exactly as it was, and half-augmented batches keep
real samples."""

from __future__ import annotations

import numpy as np
from edgekit.targets import load_profile


def batchnorm_net():
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
                         nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1, bias=False),
                         nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(16, 4))


def test_measuring_with_reestimated_batchnorm_leaves_the_dense_statistics_as_they_were():
    import torch
    from edgekit.converters.pruning.recover import reestimate_batchnorm
    from edgekit.converters.pruning.widths import measure_groups

    net = batchnorm_net()
    data = np.random.default_rng(0).standard_normal((48, 3, 8, 8)).astype(np.float32) + 2.0
    reestimate_batchnorm(net, [data])  # statistics that differ from the masked ones
    before = {k: v.clone() for k, v in net.state_dict().items()}
    groups, _ = measure_groups(net, (torch.from_numpy(data[:1]),), [data], load_profile("rpi4"))
    after = net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not net.training and not any(m.training for m in net.modules())
    assert groups and all(0.0 <= e < float("inf") for g in groups for e in g.errors.values())
    # thinning more never measures as cheaper than thinning less (masks are nested)
    for group in groups:
        widths = sorted(group.errors)
        assert group.errors[widths[0]] >= group.errors[widths[-1]]


def test_partial_augmentation_keeps_some_samples_as_they_are():
    import torch
    from edgekit.converters.pruning.distill import augment_images

    batch = torch.from_numpy(
        np.random.default_rng(2).random((64, 1, 12, 12)).astype(np.float32))
    none = augment_images(batch, 1, torch.Generator().manual_seed(0), share=0.0)
    assert torch.equal(none, batch)
    half = augment_images(batch, 1, torch.Generator().manual_seed(0), share=0.5)
    same = sum(torch.equal(a, b) for a, b in zip(half, batch, strict=True))
    assert 0 < same < 64 and half.shape == batch.shape
