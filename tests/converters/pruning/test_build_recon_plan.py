"""`edgekit build` under a latency budget, from a PyTorch source: the widths are planned by
reconstruction's error (recon_plan.py), the kept channels chosen by reconstruction and the
consumers refit, and the manifest reports the pruned float model's agreement after each
step (issue 34). Real torch, real onnxruntime, the MobileNet-style net trained on
scikit-learn's digits (tools/fixtures/trained/ptq_mobilenet.pt)."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.errors import BudgetError

# the depthwise convs torch-pruning roots the expansion groups at
EXPANSIONS = {f"{block}.block.1.0" for block in range(2, 9)}


def _net_and_data(folder):
    import torch

    from tools.fixtures import train_ptq_nets as nets

    x_train, y_train, x_test, y_test = nets.dataset("digits")
    calib, val = folder / "calib.npz", folder / "val.npz"
    np.savez(calib, x=x_train[:128], y=y_train[:128])
    np.savez(val, x=x_test[:200], y=y_test[:200])
    return nets.trained("mobilenet"), torch.from_numpy(x_train[:1]), calib, val


def _dense_ms(net, example, folder) -> float:
    import torch
    from edgekit.converters.estimate import estimate
    from edgekit.targets import load_profile

    path = folder / "dense.onnx"
    torch.onnx.export(net, (example,), str(path), dynamo=False, opset_version=17)
    profile = load_profile("rpi4")
    return estimate(str(path), profile).variants["int8"].latency_s[profile.threads] * 1e3


@pytest.fixture(scope="module")
def latency_pruned(tmp_path_factory):
    from edgekit.converters import build

    folder = tmp_path_factory.mktemp("recon_build")
    net, example, calib, val = _net_and_data(folder)
    budget = round(_dense_ms(net, example, folder) * 0.8, 4)
    result = build(net, example, target="rpi4", calib=str(calib), val=str(val),
                   output=folder / "pruned.edgekit", formats=["onnx"], method="minmax",
                   budgets={"latency_ms": budget}, quiet=True, finetune_steps=20,
                   prune_ratios=[0.0, 0.25])
    return result.manifest, budget


def test_latency_budget_plans_widths_by_reconstruction_and_reports_each_step(latency_pruned):
    manifest, budget = latency_pruned
    pruning = manifest["pruning"]
    plan = pruning["width_plan"]
    # before the wiring the plan came from magnitude masks over every group
    assert plan["method"].startswith("reconstruction")
    thinned = {name for name, g in plan["groups"].items() if g["width"] < g["channels"]}
    assert thinned and all(g["width"] % 8 == 0 for g in plan["groups"].values())
    # the plan holds only groups read by one 1x1 conv (the expansions, and such outputs)
    assert thinned & EXPANSIONS
    for name in plan["groups"]:
        assert pruning["channels"][name][1] == plan["groups"][name]["width"]
    refit_layers = {layer["consumer"] for layer in pruning["reconstructed"]}
    assert len(refit_layers) == len(thinned)
    steps = pruning["agreement_by_step"]
    assert set(steps) == {"selected", "refit", "distilled"}
    # the least-squares refit rebuilds what selection alone loses
    assert steps["refit"] >= steps["selected"]
    assert steps["refit"] >= 0.9
    checks = manifest["budgets"]["checks"]
    assert checks["latency_ms"]["ok"] and checks["latency_ms"]["value"] <= budget


def test_a_budget_pruning_cannot_reach_exits_3_naming_the_lever(tmp_path):
    from edgekit.converters import build

    net, example, calib, val = _net_and_data(tmp_path)
    budget = round(_dense_ms(net, example, tmp_path) * 0.05, 4)
    with pytest.raises(BudgetError) as caught:
        build(net, example, target="rpi4", calib=str(calib), val=str(val),
              output=tmp_path / "never.edgekit", formats=["onnx"], method="minmax",
              budgets={"latency_ms": budget}, quiet=True, finetune_steps=5,
              prune_ratios=[0.0, 0.25, 0.5])
    assert caught.value.exit_code == 3
    assert "larger target or relax --max-latency-ms" in str(caught.value)
    assert not (tmp_path / "never.edgekit").exists()
