"""Pruning: torch structured (channels removed, multiples of 8), label-free recovery, ONNX sparsity."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters import BuildConfig, stages_for
from edgekit.converters.pruning import (
    ROUND_TO,
    kept_channels,
    prune_structured,
    reestimate_batchnorm,
    sparsify,
)
from edgekit.converters.pruning.sparsity import MIN_ELEMENTS

import edgekit
from edgekit.artifact.archive import read_artifact
from edgekit.cli import main

from ..conftest import DIGITS_NPZ, DIGITS_ONNX
from .sizing import TORCH_SOURCE, digits_module, digits_weights


@pytest.mark.parametrize("channels, ratio, kept", [
    (64, 0.5, 32), (64, 0.3, 40), (32, 0.75, 8), (32, 0.9, 8), (12, 0.25, 8), (100, 0.1, 88),
    (8, 0.5, 8), (6, 0.5, 6), (64, 0.0, 64),
])
def test_kept_channels_are_multiples_of_8(channels, ratio, kept):
    assert kept_channels(channels, ratio) == kept


def test_digits_cnn_loses_channels_but_keeps_its_output():
    import torch

    dense = digits_module()
    x = torch.zeros(1, 1, 8, 8)
    pruned, report = prune_structured(dense, (x,), 0.5)
    assert dense.features[0].out_channels == 32  # the original is untouched
    assert pruned.features[0].out_channels == 16 and pruned.features[2].out_channels == 32
    assert pruned.head[1].in_features == 32 * 4 * 4  # the Flatten/Linear coupling followed
    for name, (before, after) in report.channels.items():
        if name == "head.4":  # the classifier: its outputs are the model's
            assert before == after == 10
        else:
            assert after % ROUND_TO == 0 and after < before, (name, before, after)
    assert report.kept_whole == ["head.4"]
    assert report.params_after < 0.3 * report.params_before
    assert pruned(torch.zeros(3, 1, 8, 8)).shape == (3, 10)


def test_residual_and_depthwise_groups_stay_consistent():
    import torch
    import zoo

    dense = zoo.mobilenetv2_like(num_classes=10, width=0.5).eval()
    x = torch.randn(2, 3, 32, 32)
    pruned, report = prune_structured(dense, (x[:1],), 0.5)
    odd = {k: v for k, v in report.channels.items() if v[1] % ROUND_TO and k not in
           report.kept_whole}
    assert not odd, f"channel counts not multiples of {ROUND_TO}: {odd}"
    assert report.params_after < 0.5 * report.params_before
    assert pruned(x).shape == (2, 10)


def test_batchnorm_statistics_are_re_estimated_on_the_data():
    import torch
    from torch import nn

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    data = np.random.default_rng(0).normal(2.0, 3.0, (64, 3, 10, 10)).astype(np.float32)
    assert reestimate_batchnorm(model, [data]) == 1
    with torch.no_grad():
        pre = model[0](torch.from_numpy(data))
    norm = model[1]
    assert torch.allclose(norm.running_mean, pre.mean(dim=(0, 2, 3)), atol=1e-4)
    assert torch.allclose(norm.running_var, pre.var(dim=(0, 2, 3)), rtol=2e-2)
    assert norm.momentum == 0.1 and not norm.training  # restored


def test_onnx_sparsity_zeroes_the_smallest_weights():
    import onnx
    from edgekit.converters.core.runner import session
    from onnx import numpy_helper

    model = onnx.load(str(DIGITS_ONNX))
    before = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    report = sparsify(model, 0.5)
    after = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    assert set(report.tensors) == {"features.2.weight", "features.5.weight", "head.1.weight"}
    assert set(report.skipped_small) == {"features.0.weight", "head.4.weight"}
    for name in report.tensors:
        w0, w1 = before[name], after[name]
        assert (w1 == 0).mean() == pytest.approx(0.5, abs=1e-3)
        kept = w1 != 0
        assert np.abs(w0[~kept]).max() <= np.abs(w0[kept]).min()  # the smallest went
        assert np.array_equal(w0[kept], w1[kept])
    for name in report.skipped_small + ["features.0.bias"]:
        assert np.array_equal(before[name], after[name]) and before[name].size < MIN_ELEMENTS
    sess = session(model.SerializeToString())
    assert sess.run(None, {"image": np.zeros((2, 1, 8, 8), np.float32)})[0].shape == (2, 10)


def test_prune_runs_after_data_and_before_prepare():
    onnx_names = stages_for(BuildConfig(source="m.onnx", prune=0.3))
    assert onnx_names[:5] == ["load", "data", "pin", "prune", "prepare"]
    # prepare follows pin: the shapes are pinned from the data, then onnxruntime folds
    assert stages_for(BuildConfig(source="m.onnx"))[:4] == ["load", "data", "pin", "prepare"]
    torch_names = stages_for(BuildConfig(source="net.py:Net", prune=0.3))
    assert torch_names.index("prune") < torch_names.index("check_export")


def test_cli_prune_builds_a_smaller_torch_model_that_still_reads_digits(tmp_path, capsys,
                                                                          digits_data):
    out = tmp_path / "pruned.edgekit"
    code = main(["build", TORCH_SOURCE, "--weights", str(digits_weights(tmp_path)),
                 "--input-shape", "1x1x8x8", "--calib", str(DIGITS_NPZ), "--target", "host",
                 "--format", "onnx", "--prune", "0.5", "-q", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    manifest = read_artifact(out).manifest
    pruning = manifest["pruning"]
    assert pruning["ratio"] == 0.5 and pruning["method"].startswith("structured")
    assert pruning["channels"]["features.2"] == [64, 32]
    typed = read_artifact(out).spec.pruning  # the width per layer, typed in the manifest
    assert typed.widths == "uniform" and typed.channels["features.2"] == (64, 32)
    assert all(after % 8 == 0 for name, (_, after) in pruning["channels"].items()
               if name != "head.4")
    assert pruning["recovery"]["distillation"]["steps"] > 0
    acc = pruning["accuracy"]
    assert acc["dense_float"] >= 0.97 and acc["dense_float"] - acc["pruned_float"] <= 0.02
    assert manifest["export"]["check"]["max_rel_error"] < 1e-4  # the pruned export was checked
    x, y = digits_data
    with edgekit.load(out) as model:
        assert (model.predict(x[:300]).argmax(1) == y[:300]).mean() >= 0.95
