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


def test_a_diverging_step_size_is_cut_and_the_loss_still_falls(monkeypatch):
    """A step size that throws the student out of its minimum (as 3e-3 did to MTCNN's ONet,
    which has no BatchNorm) is cut to a tenth from the best weights, and the loss falls."""
    import importlib

    import torch

    from .test_widths import fragile_and_redundant_net

    teacher = fragile_and_redundant_net()
    student = copy.deepcopy(teacher)
    with torch.no_grad():
        for p in student.parameters():
            p.mul_(0.8)  # near the teacher, not on it
    # the package exports the function under the module's name: fetch the module itself
    module = importlib.import_module("edgekit.converters.pruning.distill")
    monkeypatch.setattr(module, "LEARNING_RATE", 3.0)  # far too large: the first steps diverge
    data = np.random.default_rng(1).standard_normal((64, 3, 16, 16)).astype(np.float32)
    report = module.distill(student, teacher, [data], steps=60, seed=0, threads=1)
    assert report.backoffs >= 1
    assert report.to_dict()["distillation"]["learning_rate_backoffs"] == report.backoffs
    assert report.fell and report.loss_after < report.loss_before
