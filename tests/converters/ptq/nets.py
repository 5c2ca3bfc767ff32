"""Tiny ONNX graphs for the post-training quantization tests, written with onnx.helper (no torch)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_act_depthwise(act: str, channels: int = 4, seed: int = 0) -> onnx.ModelProto:
    """input [1,3,6,6] -> 1x1 Conv (channel scales 1, 0.01, 10, 0.1, ...) -> act -> 3x3 depthwise.
    ``act``: "Relu" or "Clip" (Relu6)."""
    rng = np.random.default_rng(seed)
    spread = np.array([1.0, 0.01, 10.0, 0.1] * (channels // 4), np.float32)
    w1 = (rng.normal(size=(channels, 3, 1, 1)) * spread[:, None, None, None]).astype(np.float32)
    b1 = (np.abs(rng.normal(size=channels)) * spread).astype(np.float32)  # no channel always off
    w2 = rng.normal(size=(channels, 1, 3, 3)).astype(np.float32)
    b2 = rng.normal(size=channels).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    nodes = [helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], name="conv1")]
    if act == "Clip":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["c1", "lo", "hi"], ["a1"], name="act"))
    else:
        nodes.append(helper.make_node(act, ["c1"], ["a1"], name="act"))
    nodes.append(helper.make_node("Conv", ["a1", "w2", "b2"], ["output"], name="conv2", group=channels,
                                  pads=[1, 1, 1, 1]))
    graph = helper.make_graph(nodes, "cle", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, channels, 6, 6])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def biased_conv(cin: int = 16, cout: int = 4) -> onnx.ModelProto:
    """input [1,cin,4,4] -> 1x1 Conv whose per-channel int8 rounding is biased: one weight 1.0
    sets the scale 1/127, the other cin-1 weights are 0.4/127 and all round down to 0."""
    w = np.full((cout, cin, 1, 1), 0.4 / 127, np.float32)
    w[:, 0] = 1.0
    b = np.zeros(cout, np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w", "b"], ["output"], name="conv")], "bias",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, cin, 4, 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, cout, 4, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def random_conv(cin: int = 16, cout: int = 8, seed: int = 0) -> onnx.ModelProto:
    """input [1,cin,4,4] -> 3x3 Conv with random weights and biases (padding 1)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(cout, cin, 3, 3)).astype(np.float32)
    b = rng.normal(size=cout).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w", "b"], ["output"], name="conv", pads=[1, 1, 1, 1])], "round",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, cin, 4, 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, cout, 4, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
