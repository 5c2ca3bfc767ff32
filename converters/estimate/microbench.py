"""Micro-benchmark models for the host calibration (built with onnx.helper, random weights).

Rates come from chains of identical ops (``chain``): the difference between a long and a
short chain cancels the run's fixed cost and the float <-> int8 conversions at its ends.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _model(nodes: list[Any], inits: list[Any], x_shape: list[int], y_shape: list[int]) -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _spec(op: str, channels: int, size: int) -> tuple[list[int], list[tuple], int, int]:
    """(input shape, one step's ops as (onnx op, weight shape, attrs), work, output elements)
    of the measured op. A stem step is Conv 3->16 3x3 then Conv 16->3 1x1 back to 3 channels
    (the 1x1's modelled cost is taken off); every other step is a single op."""
    pads = {"pads": [1, 1, 1, 1]}
    if op == "conv":
        c, hw = channels or 64, size or 56
        return [1, c, hw, hw], [("Conv", [c, c, 3, 3], pads)], c * c * 9 * hw * hw, c * hw * hw
    if op == "stem":
        hw = size or 64
        return ([1, 3, hw, hw], [("Conv", [16, 3, 3, 3], pads), ("Conv", [3, 16, 1, 1], {})],
                16 * 3 * 9 * hw * hw, 16 * hw * hw)
    if op == "depthwise":
        c, hw = 144, 56
        return ([1, c, hw, hw], [("Conv", [c, 1, 3, 3], {**pads, "group": c})], c * 9 * hw * hw,
                c * hw * hw)
    if op in ("gemm", "small_gemm"):  # small: split across threads, but barely worth it
        m, k = (128, 512) if op == "gemm" else (16, 64)
        return [m, k], [("MatMul", [k, k], {})], m * k * k, m * k
    if op in ("elementwise", "tiny"):
        shape = [1, 64, 56, 56] if op == "elementwise" else [1, 8]
        return shape, [("Add", [1], {})], int(np.prod(shape)), int(np.prod(shape))
    raise ValueError(op)


def chain(op: str, n: int, int8: bool, rng: np.random.Generator, channels: int = 0,
          size: int = 0) -> tuple[bytes, int, int]:
    """A chain of ``n`` steps of kind ``op``: the model, the MACs (or elements) and the output
    elements of one measured op. ``channels``/``size`` override the conv shape.

    int8 wraps every op in DequantizeLinear -> op -> QuantizeLinear with 8-bit weights, the
    QDQ form onnxruntime fuses into QLinearConv / QLinearMatMul / QLinearAdd."""
    from onnx import helper
    from onnx import numpy_helper as nh

    shape, step, work, elements = _spec(op, channels, size)
    nodes, inits = [], []
    if int8:
        inits += [nh.from_array(np.array(0.05, np.float32), "s"),
                  nh.from_array(np.array(128, np.uint8), "zp")]
        nodes.append(helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["t0"]))
    prev, count = ("t0" if int8 else "x"), 0
    for _ in range(n):
        for onnx_op, w_shape, attrs in step:
            i = count = count + 1
            weight = (rng.standard_normal(w_shape) * 0.05).astype(np.float32)
            if int8 and onnx_op != "Add":
                inits += [nh.from_array(np.clip(np.round(weight / 0.002), -127, 127)
                                        .astype(np.int8), f"w{i}q"),
                          nh.from_array(np.array(0.002, np.float32), f"ws{i}"),
                          nh.from_array(np.array(0, np.int8), f"wz{i}")]
                nodes.append(helper.make_node("DequantizeLinear", [f"w{i}q", f"ws{i}", f"wz{i}"],
                                              [f"w{i}"]))
            elif int8:  # elementwise: the constant operand is 8-bit too
                inits.append(nh.from_array(np.array([3], np.uint8), f"w{i}q"))
                nodes.append(helper.make_node("DequantizeLinear", [f"w{i}q", "s", "zp"],
                                              [f"w{i}"]))
            else:
                inits.append(nh.from_array(weight, f"w{i}"))
            src = prev
            if int8:
                nodes.append(helper.make_node("DequantizeLinear", [prev, "s", "zp"], [f"d{i}"]))
                src = f"d{i}"
            out = f"t{i}" + ("f" if int8 else "")
            nodes.append(helper.make_node(onnx_op, [src, f"w{i}"], [out], **attrs))
            if int8:
                nodes.append(helper.make_node("QuantizeLinear", [out, "s", "zp"], [f"t{i}"]))
                out = f"t{i}"
            prev = out
    if int8:
        nodes.append(helper.make_node("DequantizeLinear", [prev, "s", "zp"], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    return _model(nodes, inits, shape, shape), work, elements


def mixed_chain(steps: int) -> bytes:
    """``steps`` x (MatMul 64x64, Sigmoid, Reshape, Softmax, Reshape, LayerNormalization,
    Mul, Erf) on [1, 16, 64]: the small, varied ops of a real graph, for the per-op cost.

    A chain of one op kind stays warm in caches and branch predictors and writes in place;
    a varied chain pays what a real graph pays per op."""
    from onnx import helper
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(1)
    shape = [1, 16, 64]
    inits = [nh.from_array(np.array([1, 64, 16], np.int64), "s1"),
             nh.from_array(np.array(shape, np.int64), "s2"),
             nh.from_array(np.ones(64, np.float32), "g"), nh.from_array(np.zeros(64, np.float32), "b"),
             nh.from_array(np.array([0.5], np.float32), "c")]
    nodes: list[Any] = []
    prev = "x"
    for i in range(steps):
        inits.append(nh.from_array((rng.standard_normal((64, 64)) * 0.1).astype(np.float32),
                                   f"w{i}"))
        for op, extra, attrs in (("MatMul", [f"w{i}"], {}), ("Sigmoid", [], {}),
                                 ("Reshape", ["s1"], {}), ("Softmax", [], {"axis": -1}),
                                 ("Reshape", ["s2"], {}),
                                 ("LayerNormalization", ["g", "b"], {"axis": -1}),
                                 ("Mul", ["c"], {}), ("Erf", [], {})):
            out = f"t{len(nodes)}"
            nodes.append(helper.make_node(op, [prev, *extra], [out], **attrs))
            prev = out
    nodes[-1].output[0] = "y"
    return _model(nodes, inits, shape, shape)


def gemv(k: int, n: int) -> bytes:
    """x[1, k] @ W[k, n]: at batch 1 the time is the weights' trip from memory."""
    from onnx import TensorProto, helper
    from onnx import numpy_helper as nh

    w = nh.from_array(np.random.default_rng(0).standard_normal((k, n)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "gemv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


