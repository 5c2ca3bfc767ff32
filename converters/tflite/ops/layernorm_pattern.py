"""LayerNorm written out by hand (older exports, ConvNeXt-style channels-first norms):

    mean = ReduceMean(x); d = x - mean; var = ReduceMean(Pow(d, 2) or d * d)
    y = d / Sqrt(var + eps)  [* gamma]  [+ beta]

:func:`fuse_layernorm` replaces the chain (with the Q/DQ pairs onnxruntime put inside it
around its Add and Mul) by one LayerNormalization node, so it is written as the MEAN, SUB,
MUL, MEAN, ADD, RSQRT, MUL (, MUL, ADD) builtins of ops/layernorm.py in one float island
instead of float POW, SQRT and DIV each between their own DEQUANTIZE/QUANTIZE. Reduced axes
that are not trailing (channels-first: axis 1 of NCHW, the last axis in NHWC) are passed in
the internal attribute ``edgekit_axes``.

onnxruntime's transpose optimizer may leave a Transpose between the Sub and its users
(PP-OCRv4's recognizer, Paddle2ONNX: mean over axis 1 of [N, C, T], the variance over the
last axis of [N, T, C]); the Transpose then moves to the input (with a Q/DQ pair at the
input's own parameters when it is int8: transposing commutes with per-tensor quantization)
and the LayerNormalization reduces the transposed axes.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.graph import OnnxGraph
from edgekit.converters.tflite.ops.gelu import RESTORED_RELU, _origin, _scalar
from onnx import helper

_QDQ = ("QuantizeLinear", "DequantizeLinear")


def _users(g: OnnxGraph, name: str, hops: list[onnx.NodeProto]) -> list[tuple[onnx.NodeProto,
                                                                              str]]:
    """Consumers of ``name`` as (node, the name it reads), stepping over Q -> DQ pairs
    (recorded in ``hops``); empty when the value leaves the graph on the way."""
    if name in g.outputs:
        return []
    found = []
    for user in g.consumers.get(name, []):
        if user.op_type == "QuantizeLinear":
            if user.output[0] in g.outputs:
                return []
            hops.append(user)
            for dq in g.consumers.get(user.output[0], []):
                if dq.op_type != "DequantizeLinear" or dq.output[0] in g.outputs:
                    return []
                hops.append(dq)
                for after in g.consumers.get(dq.output[0], []):
                    if after.op_type == "Relu" and after.name.endswith(RESTORED_RELU):
                        # the int16 rung's Relu on a one-sided grid (ptq/precision.py):
                        # on the variance (and variance + eps), never negative, a no-op
                        hops.append(after)
                        more = _users(g, after.output[0], hops)
                        if not more:
                            return []
                        found += more
                    else:
                        found.append((after, dq.output[0]))
        else:
            found.append((user, name))
    return found


def _single(g: OnnxGraph, name: str, hops: list, op_type: str
            ) -> tuple[onnx.NodeProto, str] | None:
    users = _users(g, name, hops)
    if len(users) != 1 or users[0][0].op_type != op_type:
        return None
    return users[0]


def _axes(g: OnnxGraph, node: onnx.NodeProto, rank: int) -> tuple[int, ...] | None:
    a = g.attr(node)
    if not a.get("keepdims", 1):
        return None
    if len(node.input) > 1 and node.input[1]:
        if node.input[1] not in g.const:
            return None
        axes = g.const[node.input[1]].reshape(-1).tolist()
    else:
        axes = a.get("axes")
    if not axes:
        return None
    return tuple(sorted(int(v) % rank for v in axes))


def _other(node: onnx.NodeProto, name: str) -> str:
    return node.input[1] if node.input[0] == name else node.input[0]


def _match(g: OnnxGraph, mean: onnx.NodeProto):
    """(x, axes, eps, gamma, beta, chain nodes, last node) for the chain starting at this
    ReduceMean, or None."""
    x = mean.input[0]
    shape = g.shapes.get(x)
    if shape is None:
        return None
    axes = _axes(g, mean, len(shape))
    hops: list[onnx.NodeProto] = []
    step = _single(g, mean.output[0], hops, "Sub")
    if axes is None or step is None:
        return None
    sub, read = step
    if sub.input[1] != read or _origin(g, sub.input[0]) != _origin(g, x):
        return None
    users = _users(g, sub.output[0], hops)
    moved = None  # a Transpose between the Sub and its users
    if len(users) == 1 and users[0][0].op_type == "Transpose":
        moved = users[0][0]
        perm = [int(p) for p in g.attr(moved).get("perm", reversed(range(len(shape))))]
        axes = tuple(sorted(perm.index(a) for a in axes))
        users = _users(g, moved.output[0], hops)
    kinds = sorted(u.op_type for u, _ in users)
    square = next((u for u, _ in users if u.op_type in ("Pow", "Mul")), None)
    div = next((u for u, r in users if u.op_type == "Div" and u.input[0] == r), None)
    if kinds not in (["Div", "Pow"], ["Div", "Mul"]) or square is None or div is None:
        return None
    if square.op_type == "Pow" and not np.isclose(_scalar(g, square.input[1]) or 0, 2.0):
        return None
    if square.op_type == "Mul" and _origin(g, square.input[0]) != _origin(g, square.input[1]):
        return None
    step = _single(g, square.output[0], hops, "ReduceMean")
    if step is None or _axes(g, step[0], len(shape)) != axes:
        return None
    var = step[0]
    step = _single(g, var.output[0], hops, "Add")
    eps = None if step is None else _scalar(g, _other(step[0], step[1]))
    if eps is None:
        return None
    add = step[0]
    step = _single(g, add.output[0], hops, "Sqrt")
    if step is None:
        return None
    sqrt = step[0]
    step = _single(g, sqrt.output[0], hops, "Div")
    if step is None or step[0] is not div or div.input[1] != step[1]:
        return None
    chain, last, gamma, beta = [mean, sub, square, var, add, sqrt, div], div, "", ""
    for op_type in ("Mul", "Add"):
        more: list[onnx.NodeProto] = []
        step = _single(g, last.output[0], more, op_type)
        if step is None:
            break
        other = _other(step[0], step[1])
        if other in g.const or (g.dq(other) is not None and g.dq(other).source in g.const):
            if op_type == "Mul":
                gamma = other
            else:
                beta = other
            chain.append(step[0])
            hops += more
            last = step[0]
        else:
            break
    # every intermediate stays inside the chain
    inside = {id(n) for n in chain + hops + ([moved] if moved is not None else [])}
    for n in chain + hops:
        if n is last:
            continue
        for out in n.output:
            if out in g.outputs or any(id(u) not in inside for u in g.consumers.get(out, [])):
                return None
    if moved is not None:
        if any(id(u) not in inside for u in g.consumers.get(moved.output[0], [])):
            return None
        x = _transpose_input(g, moved, x)
    return x, axes, float(eps), gamma, beta, chain + hops, last


def _transpose_input(g: OnnxGraph, moved: onnx.NodeProto, x: str) -> str:
    """Make ``moved`` transpose ``x`` (not the centred values); returns the transposed tensor
    the LayerNormalization reads: behind a Q/DQ pair at ``x``'s parameters when ``x`` comes
    from a DequantizeLinear, so the int8 LayerNorm sees an int8 input."""
    moved.input[0] = x
    dq = g.producer.get(x)
    out = moved.output[0]
    if dq is None or dq.op_type != "DequantizeLinear":
        g.reindex()
        return out
    args = list(dq.input[1:])
    q = helper.make_node("QuantizeLinear", [out, *args], [f"{out}_edgekit_lnq"],
                         name=f"{out}_edgekit_lnq")
    back = helper.make_node("DequantizeLinear", [q.output[0], *args], [f"{out}_edgekit_lndq"],
                            name=f"{out}_edgekit_lndq")
    at = next(i for i, n in enumerate(g.nodes) if n is moved)
    for node in (q, back):
        g.attrs[id(node)] = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    g.nodes[at + 1:at + 1] = [q, back]
    g.shapes[q.output[0]] = g.shapes[back.output[0]] = g.shapes.get(out) or g.shapes[x]
    g.reindex()
    return back.output[0]


def fuse_layernorm(g: OnnxGraph, keep_float: set[str]) -> int:
    """Replace each hand-written LayerNorm chain by one LayerNormalization node named
    after its last node. Returns the count."""
    fused = 0
    for mean in [n for n in g.nodes if n.op_type == "ReduceMean"]:
        if not any(n is mean for n in g.nodes):
            continue  # taken by an earlier match
        found = _match(g, mean)
        if found is None:
            continue
        x, axes, eps, gamma, beta, nodes, last = found
        rank = len(g.shapes[x])
        inputs = [x, gamma, beta] if beta else ([x, gamma] if gamma else [x])
        attrs = {"axis": axes[0], "epsilon": eps}
        if axes != tuple(range(axes[0], rank)):
            attrs["edgekit_axes"] = list(axes)
        ln = helper.make_node("LayerNormalization", inputs, [last.output[0]],
                              name=last.name or mean.name, **attrs)
        if any(n.name in keep_float for n in nodes if n.op_type not in _QDQ):
            keep_float.add(ln.name)
        g.replace(nodes, ln)
        fused += 1
    return fused
