"""Offline estimator: exact counts on hand-made graphs, liveness, cost model, CLI.

Every expected count below is worked out by hand from the graph's shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from edgekit.converters.estimate import CostModel, estimate
from edgekit.converters.estimate.graph import read_graph
from edgekit.converters.estimate.liveness import peak_activations
from edgekit.converters.estimate.ops import build_ops
from edgekit.targets import load_profile, profile_from_dict
from onnx import TensorProto, helper
from onnx import numpy_helper as nh

from edgekit.cli import cli
from edgekit.errors import TargetError

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "examples" / "raspberrypi" / "digits_cnn.onnx"
RNG = np.random.default_rng(0)


def make(nodes: list, inputs: dict[str, list[int]], outputs: dict[str, list[int]],
         weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "t",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [nh.from_array(v, n) for n, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def ops_of(model: onnx.ModelProto, precision: str = "float32"):
    graph = read_graph(model, precision)
    return graph, build_ops(graph)


def test_conv_macs_and_params_exact() -> None:
    # 3 -> 4 channels, 3x3, pad 1 on 8x8: every output pixel does 3*3*3 MACs; three input
    # channels (an RGB stem) is its own kind
    model = make([helper.make_node("Conv", ["x", "W", "B"], ["y"], pads=[1, 1, 1, 1])],
                 {"x": [1, 3, 8, 8]}, {"y": [1, 4, 8, 8]}, {"W": w(4, 3, 3, 3), "B": w(4)})
    _, ops = ops_of(model)
    assert [(o.kind, o.macs) for o in ops] == [("stem", 4 * 8 * 8 * 3 * 3 * 3)]  # 6912
    est = estimate(model, "rpi4")
    assert est.variants["float32"].params == 4 * 3 * 3 * 3 + 4  # 112
    assert est.variants["float32"].weight_bytes == 112 * 4
    assert est.variants["float32"].macs == 6912


def test_depthwise_and_grouped_conv_macs_exact() -> None:
    # depthwise: 8 groups of one channel, 3x3, no pad: 10x10 -> 8x8, 9 MACs per output
    dw = make([helper.make_node("Conv", ["x", "W"], ["y"], group=8)],
              {"x": [1, 8, 10, 10]}, {"y": [1, 8, 8, 8]}, {"W": w(8, 1, 3, 3)})
    _, ops = ops_of(dw)
    assert [(o.kind, o.macs) for o in ops] == [("depthwise", 8 * 8 * 8 * 9)]  # 4608
    # grouped 1x1: 16 -> 8 channels in 2 groups: each output sees 8 input channels
    grouped = make([helper.make_node("Conv", ["x", "W"], ["y"], group=2)],
                   {"x": [1, 16, 6, 6]}, {"y": [1, 8, 6, 6]}, {"W": w(8, 8, 1, 1)})
    _, ops = ops_of(grouped)
    assert [(o.kind, o.macs) for o in ops] == [("conv", 8 * 6 * 6 * 8)]  # 2304


def test_gemm_and_matmul_macs_exact() -> None:
    # Gemm A[2,5] x B^T (B is [3,5]) + C: 2*3 outputs, 5 MACs each
    gemm = make([helper.make_node("Gemm", ["a", "B", "C"], ["y"], transB=1)],
                {"a": [2, 5]}, {"y": [2, 3]}, {"B": w(3, 5), "C": w(3)})
    _, ops = ops_of(gemm)
    assert [(o.kind, o.macs) for o in ops] == [("gemm", 30)]
    # batched MatMul with a weight [2,3,4] x [4,5] -> 30 outputs x 4, then two activations
    # [2,3,5] x [2,5,6] -> 36 outputs x 5
    mm = make([helper.make_node("MatMul", ["a", "W"], ["h"]),
               helper.make_node("MatMul", ["h", "b"], ["y"])],
              {"a": [2, 3, 4], "b": [2, 5, 6]}, {"y": [2, 3, 6]}, {"W": w(4, 5)})
    _, ops = ops_of(mm)
    assert [(o.kind, o.macs) for o in ops] == [("gemm", 120), ("gemm", 180)]
    est = estimate(mm, "rpi4")
    assert est.variants["float32"].params == 20
    assert est.variants["float32"].macs_by_kind["gemm"] == 300


def test_fusion_and_elementwise_work() -> None:
    # Conv + BatchNorm + Relu is one kernel; the residual Add of two activations is another
    model = make([
        helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["y"]),
    ], {"x": [1, 4, 5, 5]}, {"y": [1, 4, 5, 5]},
        {"W": w(4, 4, 3, 3), "s": w(4), "b": w(4), "m": w(4), "v": np.ones(4, np.float32)})
    _, ops = ops_of(model)
    assert [o.op_type for o in ops] == ["Conv+BatchNormalization+Relu", "Add"]
    assert ops[0].macs == 4 * 5 * 5 * 4 * 9
    assert (ops[1].kind, ops[1].macs) == ("elementwise", 100)


def test_liveness_peak_on_branching_graph() -> None:
    # x(400 B) -> a = Neg(x) -> b = a@W1 (800 B), c = a@W2 (1200 B) -> d, e (200 B each) -> d+e
    # live at c = a@W2: a 400 + b 800 + c 1200 = 2400 B (x died after Neg); the final Add
    # writes over d (same size, dies there)
    model = make([
        helper.make_node("Neg", ["x"], ["a"]),
        helper.make_node("MatMul", ["a", "W1"], ["b"]),
        helper.make_node("MatMul", ["a", "W2"], ["c"]),
        helper.make_node("MatMul", ["b", "W3"], ["d"]),
        helper.make_node("MatMul", ["c", "W4"], ["e"]),
        helper.make_node("Add", ["d", "e"], ["y"]),
    ], {"x": [1, 100]}, {"y": [1, 50]},
        {"W1": w(100, 200), "W2": w(100, 300), "W3": w(200, 50), "W4": w(300, 50)})
    graph, ops = ops_of(model)
    live = peak_activations(graph, ops)
    assert live.peak_bytes == 2400
    assert live.peak_op.startswith("MatMul#2")
    assert live.total_bytes == 400 + 400 + 800 + 1200 + 200 + 200  # y reuses d's buffer


def qdq_conv() -> onnx.ModelProto:
    """x -> Q -> DQ -> Conv(DQ(int8 W)) -> Q -> DQ -> y: onnxruntime runs one QLinearConv."""
    scale = {"s": np.array(0.1, np.float32), "z": np.array(128, np.uint8),
             "ws": np.array(0.01, np.float32), "wz": np.array(0, np.int8),
             "Wq": RNG.integers(-127, 127, (8, 4, 3, 3)).astype(np.int8)}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
        helper.make_node("DequantizeLinear", ["Wq", "ws", "wz"], ["W"]),
        helper.make_node("Conv", ["xd", "W"], ["c"]),
        helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]),
        helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])],
        [nh.from_array(v, n) for n, v in scale.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_qdq_model_fuses_to_int8_kernels() -> None:
    _, ops = ops_of(qdq_conv(), "int8")
    assert [(o.op_type, o.int8) for o in ops] == [
        ("QuantizeLinear", False), ("Conv", True), ("DequantizeLinear", False)]
    assert ops[1].macs == 8 * 4 * 4 * 4 * 9
    assert ops[1].weight_bytes == 8 * 4 * 9 + 4 + 1  # int8 weights, their scale and zero point
    est = estimate(qdq_conv(), "rpi4")
    assert est.stored == "int8"
    assert est.variants["int8"].params == 288
    assert est.variants["int8"].weight_bytes == 288 + 2 * (4 + 1)  # + activation scale, zp
    assert est.variants["float32"].weight_bytes == 288 * 4  # the stripped, float variant


def test_a_model_read_again_is_not_inferred_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build reads its int8 graph six times (speed choice, layer speeds, estimate; float and
    int8 variants): shapes are inferred once per model, and every read gives the same graph."""
    inferred = []
    infer = onnx.shape_inference.infer_shapes

    def counting(*args, **kwargs):
        inferred.append(1)
        return infer(*args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counting)
    model = qdq_conv()
    model.graph.node[3].name = "the conv"  # a model of its own: nothing kept from other tests
    reads = [[(o.op_type, o.int8, o.macs) for o in ops_of(model, p)[1]]
             for p in ("int8", "float32", "int8", "float32")]
    assert len(inferred) == 1
    assert reads[0] == reads[2] and reads[1] == reads[3] and reads[0] != reads[1]
    other = make([helper.make_node("Conv", ["x", "W"], ["y"])],
                 {"x": [1, 4, 6, 6]}, {"y": [1, 8, 4, 4]}, {"W": w(8, 4, 3, 3)})
    ops_of(other, "int8")
    assert len(inferred) == 2  # another model: inferred


def test_float_model_int8_variant_adds_quantize_at_the_edges() -> None:
    model = make([helper.make_node("Conv", ["x", "W"], ["y"])],
                 {"x": [1, 4, 6, 6]}, {"y": [1, 8, 4, 4]}, {"W": w(8, 4, 3, 3)})
    _, ops = ops_of(model, "int8")
    assert [o.op_type for o in ops] == ["QuantizeLinear", "Conv", "DequantizeLinear"]
    assert ops[1].int8 and ops[1].weight_bytes == 288


def test_cost_model_is_monotone_in_threads_and_macs() -> None:
    profile = load_profile("rpi4")
    cost = CostModel.from_profile(profile)

    def conv(channels: int) -> onnx.ModelProto:
        return make([helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])],
                    {"x": [1, channels, 28, 28]}, {"y": [1, channels, 28, 28]},
                    {"W": w(channels, channels, 3, 3)})

    small, big = (build_ops(read_graph(conv(c))) for c in (16, 64))
    assert sum(o.macs for o in big) == 16 * sum(o.macs for o in small)
    for t in (1, 2, 4):
        assert cost.latency(big, t) > cost.latency(small, t)
    assert cost.latency(big, 1) > cost.latency(big, 2) > cost.latency(big, 4)
    est = estimate(conv(64), profile, threads=[1, 4])
    v = est.variants["float32"]
    assert v.power_w[4] > v.power_w[1] == pytest.approx(2.7 + 3.7 / 4)
    assert v.energy_j[1] == pytest.approx(v.power_w[1] * v.latency_s[1])
    assert est.variants["int8"].latency_s[4] < v.latency_s[4]


def test_estimate_errors_name_what_was_expected(tmp_path: Path) -> None:
    missing = CliRunner().invoke(cli, ["estimate", str(tmp_path / "nope.onnx")],
                                 standalone_mode=False)
    assert "no such model file" in str(missing.exception)
    data = load_profile("rpi4").to_dict()
    data["cost_model"]["conv_gmacs_f16"] = 1.0
    with pytest.raises(TargetError, match="unknown key 'conv_gmacs_f16' in \\[cost_model\\]"):
        profile_from_dict(data)
    del data["cost_model"]["conv_gmacs_f16"], data["cost_model"]["gemm_gmacs_i8"]
    with pytest.raises(TargetError, match="lacks gemm_gmacs_i8"):
        CostModel.from_profile(profile_from_dict(data))


def test_host_cost_model_needs_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from edgekit.converters.estimate import host_rates

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(TargetError, match="edgekit calibrate-host"):
        estimate(DIGITS, "host", calibrate=False)
    # a cache entry for this machine is what the host estimate then uses
    rates = dict(CostModel.from_profile(load_profile("rpi4")).values, conv_gmacs_f32=1e3)
    path = host_rates.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({host_rates.host_key(): {"rates": rates}}))
    est = estimate(DIGITS, "host", calibrate=False)
    assert est.method == "benchmark" and str(path) in est.source
    faster = estimate(DIGITS, "rpi4", calibrate=False)
    assert est.variants["float32"].latency_s[1] < faster.variants["float32"].latency_s[1]
    shown = CliRunner().invoke(cli, ["calibrate-host", "--show"])
    assert shown.exit_code == 0, shown.output
    assert "conv_gmacs_f32" in shown.output and "1000.000" in shown.output


def test_calibration_chains_run_as_int8_kernels() -> None:
    from edgekit.converters.estimate.measure import latency
    from edgekit.converters.estimate.microbench import chain

    for op in ("conv", "depthwise", "gemm", "elementwise"):
        model, work, elements = chain(op, 2, True, np.random.default_rng(0))
        ops = build_ops(read_graph(onnx.load_model_from_string(model), "int8"))
        assert [o.int8 for o in ops] == [False, True, True, False], op
        assert ops[1].macs == work and ops[1].out_elems == elements
        assert latency(model, 1, min_seconds=0.0) > 0


def test_build_records_the_estimate(digits_artifact: Path) -> None:
    from edgekit.artifact.archive import read_artifact

    section = read_artifact(digits_artifact).manifest["estimate"]
    assert section["target"] == "rpi4" and section["threads"] == [1, 4]
    int8 = section["variants"]["int8"]
    # conv 1->32 3x3 on 8x8: 18,432; conv 32->64 3x3 on 8x8: 1,179,648; conv 64->64 3x3 on
    # 4x4 (after the 2x2 max pool): 589,824; linear 1024->64: 65,536; linear 64->10: 640
    assert int8["macs"] == 18_432 + 1_179_648 + 589_824 + 65_536 + 640
    assert int8["latency_ms"]["4"] < int8["latency_ms"]["1"]
    assert int8["weight_bytes"] < section["variants"]["float32"]["weight_bytes"] / 3
