"""The int16 rung on the activations and elementwise ops real exporters write between MAC layers
(issue 31: the guard's fix stays integer). Minimal graphs with the structures of:

- Ultralytics' YOLOv8 (opset 17): Conv -> Sigmoid -> Mul (SiLU), a C2f Split / residual Add /
  Concat, and its detection head's class-score branch (Conv -> Sigmoid);
- Paddle2ONNX's PP-OCRv4 / PP-LCNet (opset 12 -> 13): HardSwish as Add(3) -> Clip(0, 6) -> Mul ->
  Div(6), a squeeze-excite gate (GlobalAveragePool -> Conv -> Relu -> Conv -> HardSigmoid -> Mul)
  and a LayerNorm written as ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt / Div / Mul / Add.

Each is quantized as the build does (onnxruntime's QDQ, uint8 activations), every node is moved
to int16 (``ptq/precision.py``), the model is checked (``graph_check``), run on onnxruntime,
written as .tflite and run on LiteRT: no float op, LiteRT within a step of onnxruntime's int16
model, and the int16 model closer to float than int8.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from edgekit.converters.graph.check import problems
from edgekit.converters.ptq.precision import INT16_OPS, apply, layer_precisions
from edgekit.converters.tflite.schema import TType
from edgekit.converters.tflite.sixteen import INT16_KERNELS
from onnx import TensorProto, helper, numpy_helper

from ..tflite.helpers import litert, ops_of, quantize, read_tflite, run_onnx

RNG = np.random.default_rng(7)


def _weight(name: str, shape: tuple[int, ...], scale: float = 0.3) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _model(nodes, inits, out_shape, opset: int, name: str) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def ultralytics_block() -> onnx.ModelProto:
    """YOLOv8-style: Conv+SiLU, C2f (Split, bottleneck with residual Add, Concat), a head conv and
    its class scores through Sigmoid."""
    def conv_silu(tag: str, src: str, cin: int, cout: int) -> list:
        inits.extend([_weight(f"{tag}.w", (cout, cin, 3, 3), 0.2), _weight(f"{tag}.b", (cout,), 0.1)])
        return [helper.make_node("Conv", [src, f"{tag}.w", f"{tag}.b"], [f"{tag}.c"], pads=[1] * 4,
                                 name=f"/{tag}/conv/Conv"),
                helper.make_node("Sigmoid", [f"{tag}.c"], [f"{tag}.s"], name=f"/{tag}/act/Sigmoid"),
                helper.make_node("Mul", [f"{tag}.c", f"{tag}.s"], [f"{tag}.y"], name=f"/{tag}/act/Mul")]

    inits: list = [numpy_helper.from_array(np.array([4, 4], np.int64), "split")]
    nodes = conv_silu("model.0", "x", 8, 8)
    nodes.append(helper.make_node("Split", ["model.0.y", "split"], ["a", "b"], axis=1, name="/model.2/Split"))
    nodes += conv_silu("model.2.m.0.cv1", "b", 4, 4) + conv_silu("model.2.m.0.cv2", "model.2.m.0.cv1.y", 4, 4)
    nodes += [helper.make_node("Add", ["b", "model.2.m.0.cv2.y"], ["r"], name="/model.2/m.0/Add"),
              helper.make_node("Concat", ["a", "b", "r"], ["cat"], axis=1, name="/model.2/Concat")]
    nodes += conv_silu("model.2.cv2", "cat", 12, 8)
    inits.extend([_weight("cls.w", (6, 8, 1, 1)), _weight("cls.b", (6,), 0.5)])
    nodes += [helper.make_node("Conv", ["model.2.cv2.y", "cls.w", "cls.b"], ["cls"], name="/model.22/cv3/Conv"),
              helper.make_node("Sigmoid", ["cls"], ["y"], name="/model.22/Sigmoid")]
    return _model(nodes, inits, [1, 6, 12, 12], 17, "yolo")


def paddle_block() -> onnx.ModelProto:
    """PP-OCRv4-style: Conv + HardSwish (Add/Clip/Mul/Div), a squeeze-excite gate with HardSigmoid,
    then a LayerNorm over the channels written as ops (SVTR's mixer) and a last conv."""
    inits = [_weight("c1.w", (8, 8, 3, 3), 0.2), _weight("c1.b", (8,), 0.2), _const("three", 3.0),
             _const("zero", 0.0), _const("six", 6.0), _const("six_d", 6.0),
             _weight("se1.w", (4, 8, 1, 1)), _weight("se1.b", (4,), 0.1),
             _weight("se2.w", (8, 4, 1, 1)), _weight("se2.b", (8,), 0.1),
             _const("two", 2.0), _const("eps", 1e-5),
             _const("gamma", 1 + 0.1 * RNG.standard_normal((1, 1, 8))),
             _const("beta", 0.1 * RNG.standard_normal((1, 1, 8))),
             numpy_helper.from_array(np.array([1, 8, 144], np.int64), "flat"),
             numpy_helper.from_array(np.array([1, 8, 12, 12], np.int64), "unflat"),
             _weight("c2.w", (8, 8, 1, 1)), _weight("c2.b", (8,), 0.1)]
    nodes = [helper.make_node("Conv", ["x", "c1.w", "c1.b"], ["c1"], pads=[1] * 4, name="p2o.Conv.0"),
             helper.make_node("Add", ["c1", "three"], ["h0"], name="p2o.Add.0"),
             helper.make_node("Clip", ["h0", "zero", "six"], ["h1"], name="p2o.Clip.0"),
             helper.make_node("Mul", ["c1", "h1"], ["h2"], name="p2o.Mul.0"),
             helper.make_node("Div", ["h2", "six_d"], ["hs"], name="p2o.Div.0"),
             helper.make_node("GlobalAveragePool", ["hs"], ["g"], name="p2o.GlobalAveragePool.0"),
             helper.make_node("Conv", ["g", "se1.w", "se1.b"], ["s1"], name="p2o.Conv.1"),
             helper.make_node("Relu", ["s1"], ["s2"], name="p2o.Relu.0"),
             helper.make_node("Conv", ["s2", "se2.w", "se2.b"], ["s3"], name="p2o.Conv.2"),
             helper.make_node("HardSigmoid", ["s3"], ["gate"], alpha=0.2, beta=0.5, name="p2o.HardSigmoid.0"),
             helper.make_node("Mul", ["hs", "gate"], ["se"], name="p2o.Mul.1"),
             helper.make_node("Reshape", ["se", "flat"], ["t0"], name="p2o.Reshape.0"),
             helper.make_node("Transpose", ["t0"], ["t"], perm=[0, 2, 1], name="p2o.Transpose.0"),
             helper.make_node("ReduceMean", ["t"], ["mu"], axes=[-1], keepdims=1, name="p2o.ReduceMean.0"),
             helper.make_node("Sub", ["t", "mu"], ["d"], name="p2o.Sub.0"),
             helper.make_node("Pow", ["d", "two"], ["d2"], name="p2o.Pow.0"),
             helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1], keepdims=1, name="p2o.ReduceMean.1"),
             helper.make_node("Add", ["var", "eps"], ["ve"], name="p2o.Add.1"),
             helper.make_node("Sqrt", ["ve"], ["sd"], name="p2o.Sqrt.0"),
             helper.make_node("Div", ["d", "sd"], ["n"], name="p2o.Div.1"),
             helper.make_node("Mul", ["n", "gamma"], ["ng"], name="p2o.Mul.2"),
             helper.make_node("Add", ["ng", "beta"], ["ln"], name="p2o.Add.2"),
             helper.make_node("Transpose", ["ln"], ["u0"], perm=[0, 2, 1], name="p2o.Transpose.1"),
             helper.make_node("Reshape", ["u0", "unflat"], ["u"], name="p2o.Reshape.1"),
             helper.make_node("Conv", ["u", "c2.w", "c2.b"], ["y"], name="p2o.Conv.3")]
    return _model(nodes, inits, [1, 8, 12, 12], 13, "ppocr")


def moonshine_block() -> onnx.ModelProto:
    """Moonshine-style (onnxruntime's ORT-format encoder saved as ONNX, opset 14): a conv stem
    with a GroupNorm written as Reshape -> InstanceNormalization -> Reshape -> Mul -> Add and
    an erf GELU, then a transformer layer on [1, frames, channels]: one attention head
    (MatMul q / k / v, scaled scores, Softmax, MatMul) with its residual Add and an MLP whose
    GELU is x * 0.5 * (1 + erf(x / sqrt 2))."""
    dim = 8
    inits = [_weight("c1.w", (dim, 8, 3, 3), 0.2), _weight("c1.b", (dim,), 0.1),
             numpy_helper.from_array(np.array([0, 1, -1], np.int64), "grouped"),
             _const("in_scale", np.ones(1)), _const("in_bias", np.zeros(1)),
             numpy_helper.from_array(np.array([1, dim, 12, 12], np.int64), "ungrouped"),
             _const("gn_gamma", 1 + 0.1 * RNG.standard_normal((dim, 1, 1))),
             _const("gn_beta", 0.1 * RNG.standard_normal((dim, 1, 1))),
             _const("sqrt2", np.sqrt(2.0)), _const("one", 1.0), _const("half", 0.5),
             numpy_helper.from_array(np.array([1, dim, 144], np.int64), "flat"),
             _weight("q.w", (dim, dim)), _weight("k.w", (dim, dim)), _weight("v.w", (dim, dim)),
             _const("temp", 1 / np.sqrt(dim)), _weight("o.w", (dim, dim)),
             _weight("fc1.w", (dim, 2 * dim)), _weight("fc1.b", (2 * dim,), 0.1),
             _const("sqrt2_b", np.sqrt(2.0)), _const("one_b", 1.0), _const("half_b", 0.5),
             _weight("fc2.w", (2 * dim, dim)), _weight("fc2.b", (dim,), 0.1)]

    def gelu(x: str, tag: str, sqrt2: str, one: str, half: str) -> list:
        return [helper.make_node("Div", [x, sqrt2], [f"{tag}.d"], name=f"/{tag}/Div"),
                helper.make_node("Erf", [f"{tag}.d"], [f"{tag}.e"], name=f"/{tag}/Erf"),
                helper.make_node("Add", [f"{tag}.e", one], [f"{tag}.a"], name=f"/{tag}/Add"),
                helper.make_node("Mul", [x, f"{tag}.a"], [f"{tag}.m"], name=f"/{tag}/Mul"),
                helper.make_node("Mul", [f"{tag}.m", half], [f"{tag}.y"], name=f"/{tag}/Mul_1")]

    nodes = [helper.make_node("Conv", ["x", "c1.w", "c1.b"], ["c1"], pads=[1] * 4, name="/conv1/Conv"),
             helper.make_node("Reshape", ["c1", "grouped"], ["g0"], name="/groupnorm/Reshape"),
             helper.make_node("InstanceNormalization", ["g0", "in_scale", "in_bias"], ["g1"],
                              epsilon=1e-5, name="/groupnorm/InstanceNormalization"),
             helper.make_node("Reshape", ["g1", "ungrouped"], ["g2"], name="/groupnorm/Reshape_1"),
             helper.make_node("Mul", ["g2", "gn_gamma"], ["g3"], name="/groupnorm/Mul"),
             helper.make_node("Add", ["g3", "gn_beta"], ["g4"], name="/groupnorm/Add")]
    nodes += gelu("g4", "stem_gelu", "sqrt2", "one", "half")
    nodes += [helper.make_node("Reshape", ["stem_gelu.y", "flat"], ["f0"], name="/Reshape"),
              helper.make_node("Transpose", ["f0"], ["h"], perm=[0, 2, 1], name="/Transpose")]
    for w in ("q", "k", "v"):
        nodes.append(helper.make_node("MatMul", ["h", f"{w}.w"], [w], name=f"/attn/{w}_proj/MatMul"))
    nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="/attn/Transpose"),
              helper.make_node("MatMul", ["q", "kt"], ["s0"], name="/attn/MatMul"),
              helper.make_node("Mul", ["s0", "temp"], ["s1"], name="/attn/Mul"),
              helper.make_node("Softmax", ["s1"], ["p"], axis=-1, name="/attn/Softmax"),
              helper.make_node("MatMul", ["p", "v"], ["av"], name="/attn/MatMul_1"),
              helper.make_node("MatMul", ["av", "o.w"], ["o"], name="/attn/o_proj/MatMul"),
              helper.make_node("Add", ["h", "o"], ["r"], name="/Add"),
              helper.make_node("MatMul", ["r", "fc1.w"], ["m0"], name="/mlp/fc1/MatMul"),
              helper.make_node("Add", ["m0", "fc1.b"], ["m1"], name="/mlp/fc1/Add")]
    nodes += gelu("m1", "mlp_gelu", "sqrt2_b", "one_b", "half_b")
    nodes += [helper.make_node("MatMul", ["mlp_gelu.y", "fc2.w"], ["m2"], name="/mlp/fc2/MatMul"),
              helper.make_node("Add", ["m2", "fc2.b"], ["y"], name="/mlp/fc2/Add")]
    return _model(nodes, inits, [1, 144, dim], 14, "moonshine")


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got.astype(np.float64)) ** 2)))


def _built(tmp_path: Path, model: onnx.ModelProto) -> dict:
    x = (RNG.standard_normal((48, 8, 12, 12)) * 1.5).astype(np.float32)
    int8 = quantize(model, tmp_path, {"x": x[:32]})
    wide = tmp_path / "a16.onnx"
    wide.write_bytes(int8.read_bytes())
    # every node of the quantized graph (the quantizer's preprocessing renames fused ones)
    done = apply(wide, {n.name for n in onnx.load(str(int8)).graph.node}, set())
    return {"float": tmp_path / "prepared.onnx", "int8": int8, "a16": wide, "done": done, "x": x[32:]}


@pytest.mark.parametrize("make", [ultralytics_block, paddle_block, moonshine_block],
                         ids=["ultralytics", "paddle2onnx", "moonshine"])
def test_every_op_of_the_block_goes_int16_and_the_tflite_stays_integer(tmp_path, make):
    from edgekit.converters.tflite import convert

    built = _built(tmp_path, make())
    assert problems(built["a16"]) == []  # valid, loads in onnxruntime, unique names
    model = onnx.load(str(built["a16"]))
    precisions = {e["op"]: e["precision"] for e in layer_precisions(model) if e["precision"] != "float"}
    assert "int8" not in precisions.values(), precisions  # nothing quantized was left on int8
    feeds = {"x": built["x"]}
    ref = run_onnx(built["float"], feeds)[0]
    int8, a16 = run_onnx(built["int8"], feeds)[0], run_onnx(built["a16"], feeds)[0]
    # the graph output keeps its int8 grid (the I/O contract): on the short transformer block
    # that rounding (~34 dB) bounds both, so the int16 gain there is smaller
    gain = 3 if make is moonshine_block else 6
    assert _sqnr(ref, a16) > _sqnr(ref, int8) + gain, (_sqnr(ref, int8), _sqnr(ref, a16))
    written = convert(model)
    assert written.float_ops == []  # every op on an integer kernel
    got = litert(written).run(feeds)[0]
    step = written.outputs[0]["quantization"]["scale"]
    steps = np.abs(a16.astype(np.float64) - got) / step
    # onnxruntime computes the int16 layers (and a LayerNorm's inside) in float between Q/DQ,
    # LiteRT in integers: the int8 output may round the other way, rarely further, and LiteRT is
    # as close to float as onnxruntime's int16 model
    assert (steps <= 1.0 + 1e-3).mean() > 0.95, (steps.max(), (steps <= 1).mean())
    assert _sqnr(ref, got) > _sqnr(ref, a16) - 1.0, (_sqnr(ref, got), _sqnr(ref, a16))
    tensors = read_tflite(written.data).subgraphs[0].tensors
    kinds = {name for name, op in ops_of(written.data)
             if name not in ("QUANTIZE", "DEQUANTIZE") and any(tensors[i].type == TType.INT16 for i in op.outputs)}
    wanted = {ultralytics_block: {"LOGISTIC"}, paddle_block: {"MEAN"},
              moonshine_block: {"MEAN", "SOFTMAX", "GELU", "BATCH_MATMUL"}}[make]
    assert {"CONV_2D", "MUL"} | wanted <= kinds, kinds


def test_the_rung_and_the_writer_agree_on_the_int16_ops():
    """An op the rung moves to int16 without a 16x8 kernel in the writer would be a float op."""
    assert INT16_OPS <= INT16_KERNELS


def yolo_packed_output() -> onnx.ModelProto:
    """YOLOv8's output: boxes (Mul by the stride, up to hundreds) and class scores (Sigmoid,
    0..1) joined by one Concat, which split_packed keeps float so each keeps its own scale."""
    inits = [_weight("box.w", (4, 8, 1, 1)), _weight("cls.w", (6, 8, 1, 1)), _const("stride", 32.0)]
    nodes = [helper.make_node("Conv", ["x", "box.w"], ["b0"], name="/model.22/cv2/Conv"),
             helper.make_node("Relu", ["b0"], ["b1"], name="/model.22/Relu"),
             helper.make_node("Mul", ["b1", "stride"], ["boxes"], name="/model.22/Mul_2"),
             helper.make_node("Conv", ["x", "cls.w"], ["c0"], name="/model.22/cv3/Conv"),
             helper.make_node("Sigmoid", ["c0"], ["scores"], name="/model.22/Sigmoid"),
             helper.make_node("Concat", ["boxes", "scores"], ["y"], axis=1, name="/model.22/Concat_25")]
    return _model(nodes, inits, [1, 10, 12, 12], 17, "packed")


def test_the_packed_outputs_float_concat_is_an_int16_concatenation(tmp_path):
    from edgekit.converters.tflite import convert

    x = (RNG.standard_normal((48, 8, 12, 12)) * 1.5).astype(np.float32)
    int8 = quantize(yolo_packed_output(), tmp_path, {"x": x[:32]}, keep_float=["/model.22/Concat_25"])
    written = convert(onnx.load(str(int8)), keep_float={"/model.22/Concat_25"})
    assert written.float_ops == []
    names = [name for name, _ in ops_of(written.data)]
    assert names[-2:] == ["CONCATENATION", "DEQUANTIZE"], names
    tensors = read_tflite(written.data).subgraphs[0].tensors
    concat = next(op for name, op in ops_of(written.data) if name == "CONCATENATION")
    assert tensors[concat.outputs[0]].type == TType.INT16
    want, got = run_onnx(int8, {"x": x[32:]})[0], litert(written).run({"x": x[32:]})[0]
    # half a step of the joined int16 grid (the boxes' int8 range over 32767: 0.013 here, 0.01 on
    # YOLOv8n's 320-pixel boxes) plus the int8 step LiteRT's LOGISTIC may round the other way
    step = float(tensors[concat.outputs[0]].quantization.scale[0])
    assert step < 0.02
    assert np.abs(want - got).max() <= step / 2 + 1 / 255 + 1e-5, (np.abs(want - got).max(), step)


def test_a_gelu_whose_int8_grid_starts_at_zero_keeps_its_negative_lobe(tmp_path):
    """GELU's output (min -0.17) over a wide range: onnxruntime's uint8 zero point rounds to 0,
    the same grid a folded Relu leaves. The rung restored a Relu there, cutting the negative
    lobe (Moonshine's stem GELUs: 40.5 -> 24.1 dB); after an Erf or Mul it restores none."""
    inits = [_weight("w", (8, 8, 1, 1), 0.3), _const("sqrt2", np.sqrt(2.0)), _const("one", 1.0),
             _const("half", 0.5), _const("gain", 60.0)]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="/conv/Conv"),
             helper.make_node("Mul", ["c", "gain"], ["c2"], name="/gain/Mul"),
             helper.make_node("Div", ["c2", "sqrt2"], ["d"], name="/Div"),
             helper.make_node("Erf", ["d"], ["e"], name="/Erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="/Add"),
             helper.make_node("Mul", ["c2", "a"], ["m"], name="/Mul"),
             helper.make_node("Mul", ["m", "half"], ["g"], name="/Mul_1"),
             helper.make_node("Conv", ["g", "w2"], ["y"], name="/conv2/Conv")]
    inits.append(_weight("w2", (8, 8, 1, 1), 0.3))
    built = _built(tmp_path, _model(nodes, inits, [1, 8, 12, 12], 14, "gelu_wide"))
    graph = onnx.load(str(built["a16"])).graph
    relu_inputs = {n.input[0].split("_DequantizeLinear")[0] for n in graph.node if n.name.endswith("__relu")}
    # 1 + erf (on [0, 2]) may keep its no-op Relu; the Erf and the Muls get none
    assert not relu_inputs & {"e", "m", "g", "c2"}, relu_inputs
