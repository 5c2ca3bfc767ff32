"""GELU -> the GELU builtin (int8 through LiteRT's lookup table, or float).

PyTorch exports exact GELU as ``x * 0.5 * (1 + erf(x / sqrt(2)))``; TFLite has no ERF, so
:func:`fuse_gelu` replaces that chain (with any Q/DQ pairs onnxruntime put inside it) by
one ONNX ``Gelu`` node after shape inference. ``Gelu`` nodes (opset 20) convert directly.

The int8 GELU is one table lookup on the exact function, where onnxruntime's QDQ graph
rounds erf, 1 + erf and the 0.5 product to int8 on the way; on their own the two agree
within one output step (tests/converters/tflite/test_transformer.py).

The accuracy guard's int16 rung (``converters/ptq/precision.py``) puts more inside the chain:
a second Q -> DQ pair where an int8 tensor meets an int16 consumer, and a Relu on the
one-sided 1 + erf (named ``...__relu``, a no-op on [0, 2]); the match steps over both
(Moonshine's int16 candidates were written with an Erf the writer has no converter for, so
the guard judged them on onnxruntime and an int16 choice would have shipped ONNX). With
the chain's Erf on the rung too, the GELU is written on LiteRT's int16 kernel.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.graph import OnnxGraph
from edgekit.converters.tflite.ops.base import OpSpec
from edgekit.converters.tflite.quant import dequantize
from edgekit.converters.tflite.schema import Op, S
from edgekit.converters.tflite.sixteen import is_int16_zero
from onnx import helper

_QDQ = ("QuantizeLinear", "DequantizeLinear")
RESTORED_RELU = "__relu"  # the name suffix of the Relu ptq/precision.py's int16 rung restores


def convert_gelu(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)
    x = ctx.to_layout(x, x.perm) if x.is_const else x
    approximate = ctx.attrs(node).get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    out = ctx.output(node, 0, x.perm)
    opts = S.GeluOptionsT()
    opts.approximate = approximate == "tanh"
    ctx.emit(Op.GELU, [x], [out], opts)
    ctx.bind(node, 0, out)


# -- the erf pattern -----------------------------------------------------------------------
def _origin(g: OnnxGraph, name: str) -> str:
    """The tensor behind a DequantizeLinear (two DQs of one tensor are the same value)."""
    dq = g.dq(name)
    return dq.source if dq is not None else name


def _root(g: OnnxGraph, name: str) -> str:
    """The float tensor behind any chain of Q -> DQ pairs (an int8 and an int16 copy of one
    tensor are the same value up to rounding)."""
    while True:
        p = g.producer.get(name)
        if p is None or p.op_type not in _QDQ:
            return name
        name = p.input[0]


def _scalar(g: OnnxGraph, name: str) -> float | None:
    """A constant single-value operand (dequantized when behind a DQ), else None."""
    if name in g.const:
        data = g.const[name]
    else:
        dq = g.dq(name)
        if dq is None or dq.source not in g.const:
            return None
        data = dequantize(g.const[dq.source], dq.scale, dq.zero_point, dq.axis)
    return float(np.asarray(data).reshape(-1)[0]) if np.size(data) == 1 else None


def _next(g: OnnxGraph, name: str, hops: list[onnx.NodeProto]
          ) -> tuple[onnx.NodeProto, str] | None:
    """The single consumer of ``name``, stepping over Q -> DQ pairs and the int16 rung's
    restored Relu (recorded in ``hops``); returns (consumer, the name it reads)."""
    while True:
        users = g.consumers.get(name, [])
        if name in g.outputs or len(users) != 1:
            return None
        user = users[0]
        if user.op_type == "QuantizeLinear":
            dqs = g.consumers.get(user.output[0], [])
            if len(dqs) != 1 or dqs[0].op_type != "DequantizeLinear" or \
                    user.output[0] in g.outputs:
                return None
            hops += [user, dqs[0]]
            name = dqs[0].output[0]
        elif user.op_type == "Relu" and user.name.endswith(RESTORED_RELU):
            hops.append(user)
            name = user.output[0]
        elif user.op_type in _QDQ:
            return None
        else:
            return user, name


def _other(node: onnx.NodeProto, name: str) -> str:
    return node.input[1] if node.input[0] == name else node.input[0]


def _match(g: OnnxGraph, erf: onnx.NodeProto) -> tuple[str, list[onnx.NodeProto]] | None:
    """(x, nodes of x * 0.5 * (1 + erf(x / sqrt 2))) around this Erf, or None."""
    pre = g.producer.get(erf.input[0])
    if pre is None or pre.op_type not in ("Div", "Mul") or erf.input[0] in g.outputs:
        return None
    if len(g.consumers.get(erf.input[0], [])) != 1:
        return None
    want = np.sqrt(2.0) if pre.op_type == "Div" else 1.0 / np.sqrt(2.0)
    scalars = [_scalar(g, n) for n in pre.input]
    if pre.op_type == "Div" and scalars[1] is not None and np.isclose(scalars[1], want, 1e-3):
        x = pre.input[0]
    elif pre.op_type == "Mul" and any(s is not None and np.isclose(s, want, 1e-3)
                                      for s in scalars):
        x = pre.input[0] if scalars[1] is not None else pre.input[1]
    else:
        return None
    nodes, hops = [pre, erf], []
    step = _next(g, erf.output[0], hops)
    if step is None or step[0].op_type != "Add":
        return None
    add, name = step
    one = _scalar(g, _other(add, name))
    if one is None or not np.isclose(one, 1.0, 1e-3):
        return None
    nodes.append(add)
    half_seen, x_seen, cur = False, False, add
    for _ in range(2):  # the two Muls, by 0.5 and by x, in either order
        step = _next(g, cur.output[0], hops)
        if step is None or step[0].op_type != "Mul":
            return None
        mul, name = step
        other = _other(mul, name)
        half = _scalar(g, other)
        if not half_seen and half is not None and np.isclose(half, 0.5, 1e-3):
            half_seen = True
        elif not x_seen and _root(g, other) == _root(g, x):
            x_seen = True
        else:
            return None
        nodes.append(mul)
        cur = mul
    return x, nodes + hops


def fuse_gelu(g: OnnxGraph, keep_float: set[str]) -> int:
    """Replace each erf GELU chain by one ``Gelu`` node named after its last Mul; kept
    float when the accuracy guard kept any node of the chain float. Returns the count."""
    fused = 0
    for erf in [n for n in g.nodes if n.op_type == "Erf"]:
        found = _match(g, erf)
        if found is None:
            continue
        x, nodes = found
        last = nodes[4]  # pre, erf, add, mul, mul, then the Q/DQ hops
        gelu = helper.make_node("Gelu", [x], [last.output[0]], name=last.name or erf.name)
        if any(n.name in keep_float for n in nodes if n.op_type not in _QDQ):
            keep_float.add(gelu.name)
        g.replace(nodes, gelu)
        fused += 1
    return fused


def _one_integer_type(ctx: ConversionContext, node: onnx.NodeProto) -> bool:
    """LiteRT's GELU reads and writes one type: int8 -> int8 or int16 -> int16 (2.3's int16
    kernel tracks onnxruntime within a step, tests/converters/tflite/test_ops_gelu16.py). A
    chain only partly on the int16 rung (int16 in, int8 out or back) runs float."""
    dq = ctx.g.dq(node.input[0])
    zeros = [dq.zero_point] + [ctx.g.q_params(q)[1] for q in ctx.g.q_consumers(node.output[0]) or []]
    return len({is_int16_zero(z) for z in zeros}) == 1


SPECS = {"Gelu": OpSpec(convert_gelu, can_int8=_one_integer_type)}
