"""The tolerance's model-own share (converters/metrics/jitter.py): an all-int8 model has
nothing to nudge (its int8 layers match bit for bit across ISAs), a float op inside (a Conv,
a Sigmoid, a Mul) is nudged by its worst-case float32 rounding, and what moves widens the
bounds twice over."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.metrics.jitter import TRANSCENDENTAL_ULPS, jitter_moves, jittered
from edgekit.converters.metrics.tolerance import JITTER_FACTOR, output_tolerance
from onnx import TensorProto, helper
from torch import nn

from tests.converters.tflite import nets
from tests.converters.tflite.helpers import quantize

SHAPE = (1, 3, 16, 16)


class Deep(nn.Module):
    """Six conv layers: a one-step flip early can grow by the output."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(*[m for i in range(6) for m in (
            nn.Conv2d(3 if i == 0 else 16, 16, 3, padding=1), nn.ReLU6())])
        self.head = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        return self.head(self.body(x))


def _qdq(tmp_path, keep_first: bool) -> onnx.ModelProto:
    src = nets.export(nets.seeded(Deep()), SHAPE, tmp_path / "float.onnx")
    first = next(n.name for n in onnx.load(str(src)).graph.node if n.op_type == "Conv")
    path = quantize(src, tmp_path, nets.inputs(SHAPE, 16, seed=1),
                    keep_float=[first] if keep_first else None)
    return onnx.load(str(path))


def test_an_all_int8_model_has_nothing_to_nudge(tmp_path):
    model = _qdq(tmp_path, keep_first=False)
    assert jittered(model) is None
    assert jitter_moves(model, nets.inputs(SHAPE, 4, seed=5), ["out0"]) == {}


def test_a_float_layer_is_nudged_by_its_sums_rounding_and_moves_the_output(tmp_path):
    model = _qdq(tmp_path, keep_first=True)
    nudged = jittered(model)
    muls = [n for n in nudged.graph.node if n.name.endswith("_edgekit_jitter")]
    assert len(muls) == 1  # only after the float Conv; the int8 ones are exact on both sides
    factor = next(t for t in nudged.graph.initializer if t.name == muls[0].input[1])
    values = onnx.numpy_helper.to_array(factor)
    k = 3 * 3 * 3  # the float Conv's terms per output element: worst case K roundoffs
    assert values.shape == (1, 16, 16, 16)  # one random sign per element
    # (float32 spacing near 1 is 2^-23 above, 2^-24 below)
    assert np.allclose(np.abs(values - 1.0), k * 2.0 ** -24, rtol=0, atol=2.0 ** -23)
    assert (values > 1).any() and (values < 1).any()
    out = model.graph.output[0].name
    moves = jitter_moves(model, nets.inputs(SHAPE, 8, seed=5), [out])
    assert moves[out].size == 8 * 8 * 16 * 16 and moves[out].max() > 0


def test_moves_widen_the_bounds_twice_over():
    expected = np.linspace(-3, 3, 1000).reshape(10, 100)
    step = 0.05
    moved = np.zeros(1000)
    moved[:30] = 2 * step  # 3% moved two steps, one element five
    moved[0] = 5 * step
    base = output_tolerance(expected, step, layers=10)
    wide = output_tolerance(expected, step, layers=10, moved=moved)
    assert wide.within_1_step == round(1 - JITTER_FACTOR * 0.03, 4) < base.within_1_step
    assert wide.max_steps == 10.0 > base.max_steps
    assert output_tolerance(expected, step, 10, moved=np.zeros(1000)) == base


def _gate_qdq() -> onnx.ModelProto:
    """An int8 model with a float gate inside: DQ(x) -> Sigmoid -> Mul(DQ(x)) -> Q -> DQ -> y,
    a squeeze-excite or SiLU the guard kept float (nothing in it is a Conv/Gemm/MatMul)."""
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.02])
    zero = helper.make_tensor("z", TensorProto.UINT8, [], [128])
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("Sigmoid", ["xd"], ["g"]),
             helper.make_node("Mul", ["xd", "g"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "s", "z"], ["mq"]),
             helper.make_node("DequantizeLinear", ["mq", "s", "z"], ["y"])]
    graph = helper.make_graph(nodes, "gate", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 64])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 64])], [scale, zero])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_float_sigmoid_and_mul_are_nudged_too():
    """The rule once nudged only float Conv/Gemm/MatMul: this model had nothing to nudge, and
    PP-OCRv4 rec (float HardSwish, LayerNorm, SE blocks) moved 30 steps on the emulated A72
    against a bound of 21."""
    nudged = jittered(_gate_qdq())
    assert nudged is not None
    factors = {t.name: onnx.numpy_helper.to_array(t) for t in nudged.graph.initializer
               if t.name.endswith("_edgekit_jitter_factor")}
    assert set(factors) == {"g_edgekit_jitter_factor", "m_edgekit_jitter_factor"}
    assert np.allclose(np.abs(factors["g_edgekit_jitter_factor"] - 1.0),
                       (1 + TRANSCENDENTAL_ULPS) * 2.0 ** -24, rtol=0, atol=2.0 ** -23)
    assert np.allclose(np.abs(factors["m_edgekit_jitter_factor"] - 1.0), 2.0 ** -24,
                       rtol=0, atol=2.0 ** -23)
    # the nudged copy computes what the model does, within the nudge
    from edgekit.converters.core.runner import session

    x = np.random.default_rng(0).uniform(-2, 2, (1, 64)).astype(np.float32)
    base = session(_gate_qdq().SerializeToString(), exact_int8=True).run(None, {"x": x})[0]
    moved = session(nudged.SerializeToString(), exact_int8=True).run(None, {"x": x})[0]
    assert np.abs(base - moved).max() <= 0.02 + 1e-6  # at most one step flipped


def _int8_silu_qdq() -> onnx.ModelProto:
    """An all-int8 SiLU as the quantizer writes YOLOv8's: DQ(x) -> Sigmoid -> Q -> DQ, then
    Mul(DQ(x), DQ(gate)) -> Q -> DQ -> y: two int8 ops, neither a Conv/Gemm/MatMul."""
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.02])
    zero = helper.make_tensor("z", TensorProto.UINT8, [], [128])
    gate_scale = helper.make_tensor("gs", TensorProto.FLOAT, [], [1 / 256])
    gate_zero = helper.make_tensor("gz", TensorProto.UINT8, [], [0])
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("Sigmoid", ["xd"], ["g"]),
             helper.make_node("QuantizeLinear", ["g", "gs", "gz"], ["gq"]),
             helper.make_node("DequantizeLinear", ["gq", "gs", "gz"], ["gd"]),
             helper.make_node("Mul", ["xd", "gd"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "s", "z"], ["mq"]),
             helper.make_node("DequantizeLinear", ["mq", "s", "z"], ["y"])]
    graph = helper.make_graph(nodes, "silu", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 64])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 64])], [scale, zero, gate_scale, gate_zero])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_int8_elementwise_ops_are_nudged_but_int8_convolutions_are_not(tmp_path):
    """onnxruntime on Arm runs an int8 Sigmoid or Mul as its own QLinear kernel, not the host's
    dequantize-compute-quantize: YOLOv8n's all-int8 ONNX landed 20 steps from the host on the
    emulated A72 while nothing was nudged (an all-int8 model was taken for bit-exact)."""
    nudged = jittered(_int8_silu_qdq())
    assert nudged is not None
    factors = {t.name for t in nudged.graph.initializer if t.name.endswith("_edgekit_jitter_factor")}
    assert factors == {"g_edgekit_jitter_factor", "m_edgekit_jitter_factor"}
    assert jittered(_qdq(tmp_path, keep_first=False)) is None  # int8 Conv + Clip: the same bytes
