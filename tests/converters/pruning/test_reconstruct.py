"""Reconstruction-aware channel selection and least-squares refit (issue 34), on the
MobileNet-style net trained on scikit-learn's digits (tools/fixtures/trained/ptq_mobilenet.pt)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

TRAINED = Path(__file__).resolve().parents[3] / "tools" / "fixtures" / "trained" / "ptq_mobilenet.pt"


@pytest.fixture(scope="module")
def digits_net():
    import torch

    from tools.fixtures import train_ptq_nets as nets

    net = nets.make("mobilenet")
    net.load_state_dict(torch.load(TRAINED))
    x_train, _, x_test, _ = nets.dataset("digits")
    return net.eval(), x_train[:64], x_test[:256]


def _projection_io(net, data, name):
    """The dense net's input and output of the conv ``name`` as (channels, rows)."""
    import torch

    found = {}
    module = dict(net.named_modules())[name]
    handle = module.register_forward_hook(
        lambda _m, i, o: found.update(x=i[0].detach(), y=o.detach()))
    with torch.no_grad():
        net(torch.from_numpy(data))
    handle.remove()
    flat = [found[k].transpose(0, 1).reshape(found[k].shape[1], -1).double().numpy()
            for k in ("x", "y")]
    return flat[0], flat[1]


def test_reconstruction_rebuilds_the_projection_better_than_magnitude_at_the_same_width(
        digits_net):
    import torch
    import torch_pruning as tp
    from edgekit.converters.pruning.reconstruct import eliminate, relative_error

    net, calib, _ = digits_net
    # block 3's expansion channels (144): expand 1x1 -> BN -> ReLU -> depthwise -> BN -> ReLU,
    # read by the projection 1x1 "3.block.2.0" only
    x, y = _projection_io(net, calib, "3.block.2.0")
    keep = 72
    graph = tp.DependencyGraph().build_dependency(net, example_inputs=[torch.zeros(1, 1, 32, 32)])
    expand = dict(net.named_modules())["3.block.0.0"]
    group = graph.get_pruning_group(expand, tp.prune_conv_out_channels, list(range(144)))
    scores = tp.importance.MagnitudeImportance(p=2)(group)
    by_magnitude = sorted(torch.argsort(scores, descending=True)[:keep].tolist())
    weight = dict(net.named_modules())["3.block.2.0"].weight.detach().double()
    weight = weight.reshape(weight.shape[0], -1).numpy()
    magnitude_error = relative_error(y, weight[:, by_magnitude] @ x[by_magnitude])

    prior = np.hstack([weight, np.zeros((weight.shape[0], 1))])  # the dense conv has no bias
    kept, w, b = eliminate(x, y, keep, prior)
    assert len(kept) == keep
    selected_error = relative_error(y, weight[:, kept] @ x[kept])
    refit_error = relative_error(y, w @ x[kept] + b[:, None])
    assert refit_error <= selected_error
    # measured: magnitude 0.42, reconstruction's channels 0.29, refitted 0.062 (7x lower)
    assert refit_error < 0.5 * magnitude_error


def test_pruning_by_reconstruction_refits_every_consumer_and_keeps_the_digits(digits_net):
    import torch
    from edgekit.converters.pruning import prune_structured, reestimate_batchnorm

    net, calib, test = digits_net
    args = (torch.from_numpy(calib[:1]),)
    rec, report = prune_structured(net, args, 0.5, calib=[calib])
    mag, _ = prune_structured(net, args, 0.5)
    reestimate_batchnorm(mag, [calib])
    assert [p.shape for p in rec.parameters() if p.dim() > 1] == [
        p.shape for p in mag.parameters() if p.dim() > 1]  # the same architecture
    fits = report.reconstruction.layers
    assert fits and all(f.error_refit <= f.error_selected for f in fits)
    with torch.no_grad():
        xs = torch.from_numpy(test)
        want = net(xs).argmax(1)
        rec_agree = float((rec(xs).argmax(1) == want).float().mean())
        mag_agree = float((mag(xs).argmax(1) == want).float().mean())
    # measured on 256 held-out digits: reconstruction 0.938, magnitude 0.453 (no distillation)
    assert rec_agree > 0.85 and rec_agree > mag_agree + 0.2


def test_a_consumer_without_batchnorm_whose_outputs_were_cut_is_refit():
    """The projection has no BatchNorm after it (onnxruntime folded it, as in PP-OCR's cls
    through onnx2torch) and a 3x3 conv reads its outputs, so magnitude cuts them first: its
    rows must still be weighed as the dense rows they are (an IndexError before)."""
    import torch
    from edgekit.converters.pruning import prune_structured
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(16, 32, 1), nn.ReLU(),
                        nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.ReLU(),
                        nn.Conv2d(32, 24, 1), nn.ReLU(),
                        nn.Conv2d(24, 16, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(16, 4)).eval()
    data = np.random.default_rng(0).standard_normal((32, 3, 10, 10)).astype(np.float32)
    pruned, report = prune_structured(net, (torch.from_numpy(data[:1]),), 0.5, calib=[data])
    assert report.channels["6"] == [24, 8]  # cut by magnitude (a 3x3 conv reads them)
    refit = {fit.consumer: fit for fit in report.reconstruction.layers}
    assert "6" in refit and refit["6"].channels == (32, 16)
    assert refit["6"].error_refit <= refit["6"].error_selected
    assert pruned(torch.from_numpy(data[:2])).shape == (2, 4)
