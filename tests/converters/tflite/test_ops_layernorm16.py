"""LayerNormalization between int8 tensors is written on LiteRT's int16 kernels
(ops/layernorm16.py): no float op, and within one output step of onnxruntime's QDQ graph,
which computes it in float on the dequantized input."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .helpers import ops_of, parity

TOKENS, WIDTH = 6, 32


def _layernorm_qdq(path) -> None:
    """x -> Q/DQ (uint8, zero point off centre) -> LayerNormalization -> Q/DQ -> y."""
    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(rng.uniform(0.5, 1.5, WIDTH).astype(np.float32), "gamma"),
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, WIDTH).astype(np.float32), "beta"),
        numpy_helper.from_array(np.float32(0.05), "sx"),
        numpy_helper.from_array(np.uint8(120), "zx"),
        numpy_helper.from_array(np.float32(5.0 / 127), "sy"),
        numpy_helper.from_array(np.uint8(128), "zy"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
        helper.make_node("LayerNormalization", ["xd", "gamma", "beta"], ["ln"], name="ln",
                         axis=-1, epsilon=1e-5),
        helper.make_node("QuantizeLinear", ["ln", "sy", "zy"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "ln16", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                      [1, TOKENS, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, TOKENS, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))


def test_int8_layernorm_runs_on_int16_kernels_within_one_step(tmp_path):
    path = tmp_path / "ln.onnx"
    _layernorm_qdq(path)
    rng = np.random.default_rng(0)
    # rows with their own offset and spread (10 to 40 input steps), one constant row
    x = rng.normal(0, 1, (8, TOKENS, WIDTH)) * rng.uniform(0.5, 2.0, (8, TOKENS, 1)) \
        + rng.uniform(-1.5, 1.5, (8, TOKENS, 1))
    x[0, 0] = 0.7
    model, within, worst = parity(path, {"x": x.astype(np.float32)})
    assert model.float_ops == [], model.float_ops
    names = [name for name, _ in ops_of(model.data)]
    assert names == ["QUANTIZE", "MEAN", "SUB", "MUL", "MEAN", "ADD", "SQRT", "MAXIMUM", "DIV", "MUL",
                     "ADD", "QUANTIZE"], names
    assert within[0] == 1.0 and worst[0] <= 1.0 + 1e-3, (within, worst)
