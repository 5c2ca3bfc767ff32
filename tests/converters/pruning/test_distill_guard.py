"""Distillation's guard: when the held-out loss does not fall, it stops early, keeps the
weights as they were and says so."""

from __future__ import annotations

import copy

import numpy as np


def test_distillation_stops_and_says_so_when_the_loss_cannot_fall():
    import torch
    from edgekit.converters.pruning import distill
    from edgekit.converters.pruning.distill import PATIENCE

    from .test_widths import fragile_and_redundant_net

    teacher = fragile_and_redundant_net()
    student = copy.deepcopy(teacher)  # already the teacher: the loss starts at 0
    before = {k: v.clone() for k, v in student.state_dict().items()}
    data = np.random.default_rng(1).standard_normal((64, 3, 16, 16)).astype(np.float32)
    report = distill(student, teacher, [data], steps=100, seed=0, threads=1)
    assert report.stopped.startswith("loss did not fall")
    assert not report.fell and report.held_out >= 8 and report.augment  # images: augmented
    assert report.distill_steps < 100  # stopped after PATIENCE stale evaluations, not 100
    assert len(report.curve) == PATIENCE + 1  # the start and each stale evaluation
    after = student.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # weights left as they were
