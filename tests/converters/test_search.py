"""Budget-fitting search on the real digits CNN: budgets that force pruning are met and the
accuracy is reported against the dense float model; impossible budgets exit 3 with a table."""

from __future__ import annotations

import pytest
from edgekit.converters import build
from edgekit.converters.estimate import estimate

import edgekit
from edgekit.cli import main

from ..conftest import DIGITS_NPZ, DIGITS_ONNX
from .sizing import TORCH_SOURCE, digits_weights


@pytest.fixture(scope="module")
def latency_forced(tmp_path_factory):
    """Torch digits CNN on rpi4 with a latency budget 15% under the dense model's estimate."""
    folder = tmp_path_factory.mktemp("search")
    dense_ms = estimate(str(DIGITS_ONNX), "rpi4").variants["int8"].latency_s[4] * 1e3
    budget = round(dense_ms * 0.85, 4)
    result = build(TORCH_SOURCE, target="rpi4", weights=str(digits_weights(folder)),
                   input_shape=(1, 1, 8, 8), calib=str(DIGITS_NPZ),
                   output=folder / "fit.edgekit", formats=["onnx"], method="minmax",
                   budgets={"latency_ms": budget}, quiet=True,
                   prune_ratios=[0.0, 0.5])
    return result, budget, dense_ms


def test_latency_budget_forces_structured_pruning_and_is_met(latency_forced):
    result, budget, dense_ms = latency_forced
    m = result.manifest
    assert m["pruning"]["ratio"] == 0.5 and m["pruning"]["method"].startswith("structured")
    channels = m["pruning"]["channels"]
    assert all(after % 8 == 0 for name, (_, after) in channels.items() if name != "head.4")
    checks = m["budgets"]["checks"]
    assert checks["latency_ms"]["ok"] and checks["latency_ms"]["value"] <= budget
    assert m["budgets"]["latency_ms"]["source"] == "flag"
    assert m["budgets"]["storage_mb"]["source"] == "profile rpi4"
    # the shipped model's own estimate agrees with the search's figure
    shipped = m["estimate"]["variants"]["int8"]["latency_ms"]["4"]
    assert shipped == pytest.approx(checks["latency_ms"]["value"], rel=0.02) and shipped < dense_ms


def test_accuracy_is_reported_against_the_dense_float_model(latency_forced, digits_data):
    result, _, _ = latency_forced
    val = result.manifest["validation"]
    assert val["reference"].startswith("dense float") and val["samples"] >= 200
    assert val["accuracy_float"] >= 0.97  # the unpruned float model on held-out digits
    assert val["accuracy_float"] - val["accuracy_int8"] <= 0.01  # the 1-point budget
    assert val["accuracy_drop"] == pytest.approx(
        (val["accuracy_float"] - val["accuracy_int8"]) * 100, abs=1e-6)
    x, y = digits_data
    with edgekit.load(result.path) as model:
        assert (model.predict(x[:300]).argmax(1) == y[:300]).mean() >= 0.95


def test_ranked_table_keeps_every_candidate(latency_forced):
    search = latency_forced[0].manifest["search"]
    table = {c["id"]: c for c in search["candidates"]}
    dense = table["prune0"]
    assert dense["stage"] == "estimated" and not dense["fits"]
    assert dense["missed"][0].startswith("latency") and "(+" in dense["missed"][0]
    winner = table[search["winner"]]
    assert winner["rank"] == 1 and winner["chosen"] and winner["fits"]
    assert search["candidates"][0]["id"] == search["winner"]
    assert winner["figures"]["accuracy"] is not None


def test_unreachable_budget_exits_3_with_a_table_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "never.edgekit"
    code = main(["build", str(DIGITS_ONNX), "--target", "rpi4", "--calib", str(DIGITS_NPZ),
                 "--max-latency-ms", "0.01", "--max-ram-mb", "1", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 3
    assert not out.exists() and not list(tmp_path.iterdir())
    assert "no build of digits_cnn.onnx fits the rpi4 budgets" in err
    rows = [line for line in err.splitlines() if "(estimated)" in line]  # the table's rows
    # an ONNX source prunes by sparsity only: after the first ratio misses latency and RAM,
    # the others cannot help and are skipped, said so
    assert len(rows) == 1
    assert "skipping prune ratios" in err and "saves storage, not latency" in err
    for row in rows:
        assert "estimate misses" in row and "> 0.01 ms (+" in row and "RAM" in row


def test_storage_budget_forces_sparsity_on_an_onnx_source(tmp_path):
    import zipfile

    import numpy as np
    import onnx
    from onnx import numpy_helper

    result = build(str(DIGITS_ONNX), target="host", calib=str(DIGITS_NPZ),
                   output=tmp_path / "small.edgekit", formats=["onnx"], method="minmax",
                   budgets={"storage_mb": 0.105}, quiet=True, prune_ratios=[0.0, 0.5])
    m = result.manifest
    assert result.path.stat().st_size <= 0.105e6
    assert m["pruning"]["method"].startswith("unstructured") and "zip" in m["pruning"]["note"]
    dense = {c["id"]: c for c in m["search"]["candidates"]}["prune0-minmax"]
    assert any(x.startswith("storage") for x in dense["missed"])
    with zipfile.ZipFile(result.path) as archive:
        model = onnx.load_model_from_string(archive.read("model.onnx"))
    weights = [numpy_helper.to_array(i) for i in model.graph.initializer
               if i.name == "head.1.weight_quantized"]
    assert weights and (weights[0] == 0).mean() >= 0.5  # the zeros survive int8
    assert np.isfinite(m["validation"]["accuracy_drop"])


def test_generous_budgets_stop_at_the_first_candidate(tmp_path):
    result = build(str(DIGITS_ONNX), target="host", calib=str(DIGITS_NPZ),
                   output=tmp_path / "first.edgekit", formats=["onnx"], search=True,
                   quiet=True)
    search = result.manifest["search"]
    assert search["stopped_early"] and len(search["candidates"]) == 1
    assert search["winner"] == "prune0-minmax"  # cheapest first: no pruning, minmax
    assert "pruning" not in result.manifest
