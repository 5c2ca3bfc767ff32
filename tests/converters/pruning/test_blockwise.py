"""Block-wise feature distillation after reconstruction + refit (issue 34), in real torch on
the MobileNet-style net trained on scikit-learn's digits (tools/fixtures/trained/ptq_mobilenet.pt)."""

from __future__ import annotations

import numpy as np
import pytest


def test_units_are_the_modules_around_the_refit_convs():
    from edgekit.converters.pruning.blockwise import units_of

    assert units_of(["_blocks.0._project_conv", "_blocks.0._other", "_conv_head",
                     "3.block.2.0"]) == ["_blocks.0", "_conv_head", "3.block.2"]


@pytest.fixture(scope="module")
def pruned_digits():
    import torch
    from edgekit.converters.pruning import prune_structured

    from tools.fixtures import train_ptq_nets as nets

    net = nets.trained("mobilenet")
    x_train, _, x_test, _ = nets.dataset("digits")
    example = (torch.from_numpy(x_train[:1]),)
    # every group halved: the trunk (residual adds) by magnitude, so some units' outputs
    # lose channels too and their targets must be matched to the channels they keep
    pruned, report = prune_structured(net, example, 0.5, calib=[x_train[:64]])
    return net, pruned, report, x_train[:320], x_test[:300]


def _output_error(model, dense, x) -> float:
    import torch

    with torch.no_grad():
        got, want = model(torch.from_numpy(x)), dense(torch.from_numpy(x))
    return float(((got - want) ** 2).mean() / want.var())


def test_each_unit_gets_closer_to_the_dense_one_and_so_does_the_output(pruned_digits):
    from edgekit.converters.pruning.blockwise import distill_blockwise, units_of

    dense, pruned, report, x, held = pruned_digits
    units = units_of([f.consumer for f in report.reconstruction.layers])
    widths = {n: m.out_channels for n, m in pruned.named_modules() if hasattr(m, "out_channels")}
    assert any(widths[n] < dict(dense.named_modules())[n].out_channels
               for n in widths if n.endswith("block.2.0"))  # some unit outputs are thinned
    before = _output_error(pruned, dense, held)
    fit = distill_blockwise(pruned, dense, x, units, epochs=6, lr=1e-3)
    assert [u.unit for u in fit.units] == units
    assert sum(u.kept for u in fit.units) >= len(units) - 1
    for unit in fit.units:
        assert unit.loss_after <= unit.loss_before
        assert unit.steps > 0
    after = _output_error(pruned, dense, held)
    assert after < before, (before, after)  # on digits it never saw


def test_a_unit_whose_training_does_not_help_keeps_its_weights(pruned_digits):
    import copy

    import torch
    from edgekit.converters.pruning.blockwise import distill_blockwise, units_of

    dense, pruned, report, x, _ = pruned_digits
    model = copy.deepcopy(pruned)
    units = units_of([f.consumer for f in report.reconstruction.layers])[:1]
    weights = {k: v.clone() for k, v in dict(model.named_modules())[units[0]].state_dict().items()}
    fit = distill_blockwise(model, dense, x, units, epochs=1, lr=10.0)  # diverges
    assert not fit.units[0].kept
    after = dict(model.named_modules())[units[0]].state_dict()
    assert all(torch.equal(weights[k], after[k]) for k in weights)
    assert np.isclose(fit.units[0].loss_after, fit.units[0].loss_before)
