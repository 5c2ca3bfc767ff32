"""The estimator on graphs its cost model cannot fully price: control flow (If), an
``ai.onnx.ml`` op (a tree ensemble), a vendor domain, and recurrent cells (LSTM) costed by
their unrolled multiply-accumulates. Each once raised (exit 2 after a validated build) or,
for the LSTM, counted 65.5 k MACs where a speaker encoder has 216 M."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.estimate import estimate
from edgekit.converters.estimate.graph import read_graph
from edgekit.converters.estimate.ops import build_ops
from onnx import TensorProto, helper
from onnx import numpy_helper as nh

RNG = np.random.default_rng(0)


def finish(graph: onnx.GraphProto, *domains: tuple[str, int]) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", 17)] + [helper.make_opsetid(d, v) for d, v in domains]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def weight(name: str, *shape: int) -> onnx.TensorProto:
    return nh.from_array((RNG.standard_normal(shape) * 0.05).astype(np.float32), name)


def if_model() -> onnx.ModelProto:
    """x -> Gemm -> If(sum > 0: a heavy MatMul branch, else Neg) -> Gemm: the If's work
    sits in its subgraph."""
    then = helper.make_graph([helper.make_node("MatMul", ["h", "big"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [64, 256])])
    other = helper.make_graph([helper.make_node("Neg", ["h"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [64, 256])])
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["h"]),
             helper.make_node("ReduceSum", ["h"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other, name="If_32"),
             helper.make_node("Gemm", ["b", "w2"], ["y"])]
    graph = helper.make_graph(
        nodes, "if", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 256])],
        [weight("w1", 256, 256), weight("w2", 256, 256), weight("big", 256, 256),
         nh.from_array(np.array(-1e9, np.float32), "zero")])  # the heavy branch always runs
    return finish(graph)


def test_if_is_timed_on_the_host_and_scaled() -> None:
    est = estimate(if_model(), "rpi4")
    uncosted = est.uncosted
    assert [o["op"] for o in uncosted["ops"]] == ["If"] and uncosted["costed_as"] == "host-timed"
    assert est.judges_latency
    # the branch is a third of the model's MACs: its share of the run is well above zero
    assert 0.1 < uncosted["host_share"] < 0.9
    for variant in est.variants.values():  # the If's part: the run's share of the latency
        seconds = variant.latency_s[est.threads[-1]]
        assert abs(variant.latency_by_kind["uncosted"] - seconds * uncosted["host_share"]) < 1e-12
    assert any("If (control flow" in w and "timed on this host" in w for w in est.warnings)


def tree_model() -> onnx.ModelProto:
    """x[1, 4] -> Gemm -> TreeEnsembleRegressor (two stumps) -> y[1, 1]."""
    tree = helper.make_node(
        "TreeEnsembleRegressor", ["h"], ["y"], domain="ai.onnx.ml", n_targets=1,
        nodes_treeids=[0, 0, 0, 1, 1, 1], nodes_nodeids=[0, 1, 2, 0, 1, 2],
        nodes_featureids=[0, 0, 0, 1, 0, 0], nodes_values=[0.5, 0, 0, -0.5, 0, 0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"] * 2,
        nodes_truenodeids=[1, 0, 0, 1, 0, 0], nodes_falsenodeids=[2, 0, 0, 2, 0, 0],
        target_treeids=[0, 0, 1, 1], target_nodeids=[1, 2, 1, 2], target_ids=[0, 0, 0, 0],
        target_weights=[1.0, 2.0, 3.0, 4.0], post_transform="NONE")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["h"]), tree], "trees",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])], [weight("w", 4, 4)])
    return finish(graph, ("ai.onnx.ml", 3))


def test_an_ml_domain_op_is_reported_not_refused() -> None:
    est = estimate(tree_model(), "rpi4")
    (op,) = est.uncosted["ops"]
    assert op["op"] == "TreeEnsembleRegressor" and op["reason"] == "domain 'ai.onnx.ml'"
    assert est.uncosted["host_share"] is not None
    assert est.variants["float32"].macs == 16  # the Gemm: 1 x 4 x 4
    text = est.table()
    assert "TreeEnsembleRegressor" in text


def vendor_model() -> onnx.ModelProto:
    """A node of a domain no runtime here knows: it can be neither costed nor timed."""
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["h"]),
         helper.make_node("Mystery", ["h"], ["y"], domain="com.example")], "vendor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], [weight("w", 8, 8)])
    return finish(graph, ("com.example", 1))


def test_an_op_it_cannot_time_is_said_and_the_budget_not_judged() -> None:
    est = estimate(vendor_model(), "rpi4")
    assert est.uncosted["costed_as"] == "not costed" and est.uncosted["host_share"] is None
    assert not est.judges_latency
    assert est.cannot_judge("--max-latency-ms") == (
        "cannot judge --max-latency-ms: 50.0% of the graph (1 of its nodes: Mystery) not costed")
    assert any("NOT COSTED" in w for w in est.warnings)


def lstm_model(layers: int = 3, frames: int = 160, mels: int = 40, hidden: int = 256) -> onnx.ModelProto:
    """A speaker encoder's recurrent stack: ``layers`` LSTMs, [frames, 1, mels] in."""
    nodes, weights, prev, size = [], [], "x", mels
    for i in range(layers):
        weights += [weight(f"W{i}", 1, 4 * hidden, size), weight(f"R{i}", 1, 4 * hidden, hidden),
                    weight(f"B{i}", 1, 8 * hidden)]
        nodes += [helper.make_node("LSTM", [prev, f"W{i}", f"R{i}", f"B{i}"], [f"y{i}"],
                                   hidden_size=hidden),
                  helper.make_node("Squeeze", [f"y{i}", "axis1"], [f"s{i}"])]
        prev, size = f"s{i}", hidden
    weights.append(nh.from_array(np.array([1], np.int64), "axis1"))
    graph = helper.make_graph(
        nodes, "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [frames, 1, mels])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [frames, 1, hidden])], weights)
    return finish(graph)


def test_lstm_is_costed_by_its_unrolled_macs() -> None:
    model = lstm_model()
    ops = build_ops(read_graph(model))
    per_layer = [op.macs for op in ops if op.op_type.startswith("LSTM")]
    # steps x batch x (|W| + |R|) = 160 x (4*256*40 + 4*256*256), then 160 x 2 x 4*256*256
    assert per_layer == [160 * 4 * 256 * (40 + 256), 160 * 4 * 256 * 512, 160 * 4 * 256 * 512]
    est = estimate(model, "rpi4")
    assert est.variants["float32"].macs == sum(per_layer) > 215e6
    assert not est.uncosted
    float_ms = est.variants["float32"].latency_s[est.threads[-1]]
    assert float_ms > 0.01  # 216 M MACs on a Pi 4: tens of ms, not the microseconds of 65.5 k


def test_a_build_with_an_if_ships_and_records_the_uncosted_share(tmp_path) -> None:
    """The build that once ended "node 'If_32' (If) has a subgraph; the estimator needs a flat
    graph" (exit 2, after validating): budgets judged with the If timed on the host."""
    from edgekit.converters import build

    model = if_model()
    for spec in [*model.graph.input, *model.graph.output, model.graph.node[3].attribute[0].g.output[0],
                 model.graph.node[3].attribute[1].g.output[0]]:
        spec.type.tensor_type.shape.dim[0].dim_value = 1  # batch 1: samples of [1, 256]
    path = tmp_path / "if.onnx"
    onnx.save(model, str(path))
    calib = RNG.standard_normal((32, 1, 256)).astype(np.float32)
    result = build(str(path), target="rpi4", calib={"x": calib}, output=tmp_path / "if.edgekit",
                   formats=["onnx"], quiet=True, budgets={"latency_ms": 50})
    section = result.manifest["estimate"]
    assert [o["op"] for o in section["uncosted"]["ops"]] == ["If"]
    assert section["uncosted"]["costed_as"] == "host-timed"
    assert any("timed on this host" in w for w in result.warnings)


def heavy_if_model(width: int = 1024) -> onnx.ModelProto:
    """Nearly all of the work inside an If: x -> ReduceSum -> Greater -> If(three MatMuls):
    too little costed work outside it to scale the If's host time from."""
    branch = [helper.make_node("MatMul", ["x" if i == 0 else f"m{i - 1}", f"k{i}"], [f"m{i}"])
              for i in range(3)]
    then = helper.make_graph(branch, "then", [],
                             [helper.make_tensor_value_info("m2", TensorProto.FLOAT, [1, width])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, width])])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        "heavy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
        [weight(f"k{i}", width, width) for i in range(3)]
        + [nh.from_array(np.array(-1e9, np.float32), "zero")])
    return finish(graph)


def test_a_budget_it_cannot_judge_is_said_not_failed(tmp_path) -> None:
    from edgekit.converters import build

    est = estimate(heavy_if_model(), "rpi4")
    assert est.uncosted["host_share"] > 0.9 and not est.judges_latency
    path = tmp_path / "heavy.onnx"
    onnx.save(heavy_if_model(), str(path))
    calib = RNG.standard_normal((32, 1, 1024)).astype(np.float32)
    result = build(str(path), target="rpi4", calib={"x": calib}, output=tmp_path / "h.edgekit",
                   formats=["onnx"], quiet=True, budgets={"latency_ms": 0.001})  # unmeetable
    assert result.path.exists()
    said = [w for w in result.warnings if w.startswith("cannot judge --max-latency-ms")]
    assert said and "% of the graph" in said[0] and "If" in said[0]
