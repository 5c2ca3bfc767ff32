"""InstanceNormalization and Neg, the two ops Moonshine's encoder needed (its build shipped
ONNX: "the tflite writer has no converter for ONNX op(s) InstanceNormalization", and its 16
rotary-embedding Negs ran float between DEQUANTIZE and QUANTIZE).

- InstanceNormalization between int8 tensors: the int16 MEAN/SUB/MUL/MEAN/ADD/SQRT/DIV chain
  LayerNormalization uses (ops/layernorm16.py), no float op; float builtins when kept float.
  The squares' int16 grid is (int8 range)^2 / 32767 of the whole tensor: a channel whose
  values spread over a few int8 steps only (digit images: mostly blank) gets its variance to
  a few percent, so a few elements land 2-3 steps from onnxruntime's float normalization
  (measured: 99.93% within one step on digits, 100% on random inputs).
- Neg between int8 tensors: a MUL by -1 (LiteRT's integer NEG ignores scales and zero
  points), within one step of onnxruntime's int8 model on random and digit inputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from .helpers import litert, quantize
from .op_parity import build, check, digits, random, reference

OPSET = 14  # Moonshine's export


def _conv(name: str, cin: int, cout: int, seed: int) -> tuple[onnx.NodeProto, list]:
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array((rng.standard_normal((cout, cin, 3)) * 0.5)
                                .astype(np.float32), f"{name}_w")
    b = numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32) * 0.1, f"{name}_b")
    node = helper.make_node("Conv", [f"{name}_in", w.name, b.name], [f"{name}_out"],
                            name=name, pads=[1, 1])
    return node, [w, b]


def _model(nodes: list, inits: list, shape: tuple[int, ...], out_shape: tuple[int, ...]
           ) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             list(out_shape))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model, full_check=True)
    return model


def instancenorm_net(affine: bool) -> onnx.ModelProto:
    """Conv1d -> InstanceNormalization (per-channel scale and bias, or 1 and 0) on [1, 2, 32]
    (the graph's output: compared on the normalization's own int8 grid)."""
    a, wa = _conv("a", 2, 6, 0)
    a.input[0] = "x"
    rng = np.random.default_rng(3)
    scale = rng.uniform(0.5, 2.0, 6) if affine else np.ones(6)
    bias = rng.uniform(-0.5, 0.5, 6) if affine else np.zeros(6)
    inits = [numpy_helper.from_array(scale.astype(np.float32), "scale"),
             numpy_helper.from_array(bias.astype(np.float32), "bias")]
    norm = helper.make_node("InstanceNormalization", ["a_out", "scale", "bias"], ["y"],
                            name="norm", epsilon=1e-5)
    return _model([a, norm], wa + inits, (1, 2, 32), (1, 6, 32))


def groupnorm_net() -> onnx.ModelProto:
    """Moonshine's front end: Conv1d -> Tanh -> GroupNorm(1 group) as PyTorch exports it
    (Reshape [N, 1, -1] -> InstanceNormalization(1, 0) -> Reshape -> Mul -> Add)."""
    a, wa = _conv("a", 1, 8, 4)
    a.input[0] = "x"
    rng = np.random.default_rng(6)
    inits = [numpy_helper.from_array(np.asarray([1, 1, -1], np.int64), "flat"),
             numpy_helper.from_array(np.asarray([1, 8, 16], np.int64), "back"),
             numpy_helper.from_array(np.ones(1, np.float32), "one"),
             numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, (8, 1)).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.uniform(-0.2, 0.2, (8, 1)).astype(np.float32), "beta")]
    nodes = [a, helper.make_node("Tanh", ["a_out"], ["t"], name="tanh"),
             helper.make_node("Reshape", ["t", "flat"], ["r"], name="flat"),
             helper.make_node("InstanceNormalization", ["r", "one", "zero"], ["n"],
                              name="norm", epsilon=1e-5),
             helper.make_node("Reshape", ["n", "back"], ["u"], name="back"),
             helper.make_node("Mul", ["u", "gamma"], ["g"], name="gamma_mul"),
             helper.make_node("Add", ["g", "beta"], ["y"], name="beta_add")]
    return _model(nodes, wa + inits, (1, 1, 16), (1, 8, 16))


def rotate_half_net() -> onnx.ModelProto:
    """A rotary embedding's rotate_half after a conv: cat(-x[..., 8:], x[..., :8])."""
    a, wa = _conv("a", 2, 4, 7)
    a.input[0] = "x"
    inits = [numpy_helper.from_array(np.asarray(v, np.int64), n) for n, v in
             (("lo", [0]), ("mid", [8]), ("hi", [16]), ("axis", [2]))]
    nodes = [a, helper.make_node("Slice", ["a_out", "lo", "mid", "axis"], ["x1"], name="s1"),
             helper.make_node("Slice", ["a_out", "mid", "hi", "axis"], ["x2"], name="s2"),
             helper.make_node("Neg", ["x2"], ["nx2"], name="neg"),
             helper.make_node("Concat", ["nx2", "x1"], ["y"], name="cat", axis=2)]
    return _model(nodes, wa + inits, (1, 2, 16), (1, 4, 16))


def _parity(qdq, shape: tuple[int, ...]):
    """(the written model, share of output elements within one step of onnxruntime's int8
    graph, worst difference in steps) over random and digit inputs."""
    from edgekit.converters.tflite import convert

    model = convert(onnx.load(str(qdq)))
    runner, within, worst = litert(model), [], 0.0
    for feed in (random(shape), digits(shape)):
        want, got = reference(qdq, feed)[0], runner.run(feed)[0]
        steps = np.abs(want.astype(np.float64) - got) / model.outputs[0]["quantization"]["scale"]
        within.append(float((steps <= 1.001).mean()))
        worst = max(worst, float(steps.max()))
    return model, min(within), worst


@pytest.mark.parametrize("affine", [True, False])
def test_instancenorm_is_an_int16_chain_without_float_ops(tmp_path, affine):
    qdq = build(instancenorm_net(affine), (1, 2, 32), tmp_path)
    assert "InstanceNormalization" in {n.op_type for n in onnx.load(str(qdq)).graph.node}
    model, within, worst = _parity(qdq, (1, 2, 32))
    assert model.float_ops == [], model.float_ops
    assert within >= 0.995 and worst <= 2.01, (within, worst)
    counts = model.op_counts
    assert counts.get("MEAN") == 2 and counts.get("SQRT") == 1 and counts.get("DIV") == 1, counts
    assert "DEQUANTIZE" not in counts and "RSQRT" not in counts, counts
    # a scale of ones and a bias of zeros add no MUL/ADD to the chain
    assert counts.get("MUL", 0) == (2 if affine else 1), counts
    assert counts.get("ADD", 0) == (2 if affine else 1), counts


def test_moonshine_groupnorm_front_end_has_no_float_op(tmp_path):
    qdq = build(groupnorm_net(), (1, 1, 16), tmp_path)
    types = {n.op_type for n in onnx.load(str(qdq)).graph.node}
    assert {"InstanceNormalization", "Tanh", "Reshape"} <= types, types
    model, within, worst = _parity(qdq, (1, 1, 16))
    assert model.float_ops == [], model.float_ops
    # one step off after the normalization can become up to two after the int8 Mul and Add
    assert within >= 0.995 and worst <= 3.01, (within, worst)
    assert model.op_counts.get("TANH") == 1 and model.op_counts.get("DIV") == 1, model.op_counts


def test_instancenorm_kept_float_is_float_builtins_and_matches_onnx(tmp_path):
    """Kept float (the accuracy guard's choice): MEAN/SUB/MUL/RSQRT float builtins named
    as a float op, within one step of onnxruntime's graph that has it float too."""
    src = tmp_path / "float.onnx"
    onnx.save(instancenorm_net(True), str(src))
    shape = (1, 2, 32)
    calib = {"x": np.concatenate([random(shape, 16, seed=1)["x"], digits(shape, 16)["x"]])}
    qdq = quantize(src, tmp_path, calib, keep_float=["norm"])
    model = check(qdq, "InstanceNormalization", float_ok=True)
    assert [o["op_type"] for o in model.float_ops] == ["InstanceNormalization"]
    assert model.op_counts.get("RSQRT") == 1, model.op_counts


def test_instancenorm_between_int16_tensors_stays_on_int16_kernels(tmp_path):
    """The guard's int16 rung around it (symmetric int16 Q/DQ, opset 21): the chain takes
    the int16 input as it is, no DEQUANTIZE (before: float between DEQUANTIZE/QUANTIZE)."""
    from .helpers import parity

    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.uniform(-0.3, 0.3, 4).astype(np.float32), "bias"),
             numpy_helper.from_array(np.float32(4.0 / 32767), "sx"),
             numpy_helper.from_array(np.float32(6.0 / 32767), "sy"),
             numpy_helper.from_array(np.int16(0), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xd"]),
             helper.make_node("InstanceNormalization", ["xd", "scale", "bias"], ["n"],
                              name="norm", epsilon=1e-5),
             helper.make_node("QuantizeLinear", ["n", "sy", "z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["y"])]
    graph = helper.make_graph(nodes, "in16", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 24])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 4, 24])], inits)
    path = tmp_path / "in16.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    # channels with their own offset and spread (hundreds of int16 steps and more)
    x = rng.normal(0, 1, (8, 4, 24)) * rng.uniform(0.1, 1.0, (8, 4, 1)) \
        + rng.uniform(-1.5, 1.5, (8, 4, 1))
    model, within, worst = parity(path, {"x": x.astype(np.float32)})
    assert model.float_ops == [], model.float_ops
    assert "DEQUANTIZE" not in model.op_counts and model.op_counts.get("DIV") == 1
    # the variance's grid (range^2 / 32767) is coarse for channels spread over 1/80 of the
    # range: measured worst 102 int16 steps (0.019), under half an int8 step of that range
    assert worst[0] * 6.0 / 32767 <= 0.5 * 6.0 / 127, (within, worst)


@pytest.mark.parametrize("activation", ["uint8", "int8"])
def test_neg_is_an_int8_mul_and_matches_onnx(tmp_path, activation):
    qdq = build(rotate_half_net(), (1, 2, 16), tmp_path, activation)
    model = check(qdq, "Neg")
    assert model.float_ops == [], model.float_ops
    assert "NEG" not in model.op_counts and "DEQUANTIZE" not in model.op_counts, model.op_counts


def test_neg_between_int16_tensors_is_an_int16_mul(tmp_path):
    """The guard's int16 rung around a Neg: MUL by -1 held exactly at int16 (code -32767 at
    1/32767), within one int16 step of onnxruntime (before: float between DEQUANTIZE and
    QUANTIZE)."""
    from .helpers import parity

    inits = [numpy_helper.from_array(np.float32(2.0 / 32767), "sx"),
             numpy_helper.from_array(np.float32(3.0 / 32767), "sy"),
             numpy_helper.from_array(np.int16(0), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xd"]),
             helper.make_node("Neg", ["xd"], ["n"], name="neg"),
             helper.make_node("QuantizeLinear", ["n", "sy", "z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["y"])]
    graph = helper.make_graph(nodes, "neg16", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 16])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 4, 16])], inits)
    path = tmp_path / "neg16.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    x = np.random.default_rng(4).uniform(-2, 2, (8, 4, 16)).astype(np.float32)
    model, within, worst = parity(path, {"x": x})
    assert model.float_ops == [] and model.op_counts.get("MUL") == 1, model
    assert within[0] == 1.0 and worst[0] <= 1.001, (within, worst)


def test_neg_float_model_writes_neg():
    """A float graph (no Q/DQ) keeps a float NEG, named as a float op."""
    from edgekit.converters.tflite import convert

    model = convert(rotate_half_net())
    assert model.op_counts.get("NEG") == 1, model.op_counts
    assert {o["op_type"] for o in model.float_ops} >= {"Neg"}


def test_groupnorm_over_more_than_65535_elements_takes_its_means_in_stages(tmp_path):
    """Moonshine's GroupNorm normalizes 416 x 250 = 104000 values at once; LiteRT's int16
    MEAN sums them in int32, which wraps when they sit near one end of their range (a mean
    of 0.9 read -0.36): the writer splits the mean into stages of at most 65535."""
    from .helpers import parity

    n = 104000
    inits = [numpy_helper.from_array(np.ones(1, np.float32), "one"),
             numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
             numpy_helper.from_array(np.float32(1.0 / 127), "sx"),
             numpy_helper.from_array(np.float32(4.0 / 127), "sy"),
             numpy_helper.from_array(np.int8(0), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xd"]),
             helper.make_node("InstanceNormalization", ["xd", "one", "zero"], ["n"],
                              name="norm", epsilon=1e-5),
             helper.make_node("QuantizeLinear", ["n", "sy", "z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["y"])]
    graph = helper.make_graph(nodes, "gn", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 1, n])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 1, n])], inits)
    path = tmp_path / "gn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), str(path))
    rng = np.random.default_rng(9)
    # Tanh-like outputs near one end: means 0.9 and -0.8, spread over ~10 int8 steps
    x = np.stack([0.9 + 0.08 * rng.standard_normal((1, n)),
                  -0.8 + 0.08 * rng.standard_normal((1, n))]).clip(-1, 1)
    model, within, worst = parity(path, {"x": x.astype(np.float32)})
    assert model.float_ops == [], model.float_ops
    assert model.op_counts.get("MEAN") == 4, model.op_counts  # two means, two stages each
    assert within[0] >= 0.999 and worst[0] <= 2.01, (within, worst)
