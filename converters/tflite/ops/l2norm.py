"""L2 normalization: LpNormalization (p = 2) -> L2_NORMALIZATION, which LiteRT runs in int8;
the chain PyTorch exports for ``F.normalize(x, dim=d)`` is fused into it first::

    n = ReduceL2(x, axes=[d], keepdims=1); n = Clip(n, eps) or Max(n, eps); [Expand(n)]
    y = Div(x, n)                                     becomes           LpNormalization(x)

(the Clip/Max only matters for vectors of norm below eps, 1e-12 by default: zero vectors,
which both forms map to zeros). LiteRT's int8 kernel normalizes along the last axis of its
tensor, writing at the fixed scale 1/128, zero point 0; the result is requantized to the
graph's QuantizeLinear after the Div. That grid is too coarse where the graph's is finer
(a 384-feature embedding has elements near 1/sqrt(384) = 0.05, 6 steps of 1/128: 35% of them
landed 2-3 steps off onnxruntime); then the node is written on LiteRT's int16 kernels as
``x * RSQRT(MEAN(x * x)) / sqrt(n)`` (bounds as in layernorm16.py), still with no float op.
A ReduceL2 on its own is written float (SQRT of a SUM of squares): LiteRT has no integer L2
reduction.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.graph import OnnxGraph
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.ops.gelu import _origin, _scalar
from edgekit.converters.tflite.ops.layernorm16 import const16, int8_range, q16
from edgekit.converters.tflite.ops.layernorm_pattern import _axes, _users
from edgekit.converters.tflite.quant import QParams
from edgekit.converters.tflite.schema import Op, S
from onnx import helper

_QDQ = ("QuantizeLinear", "DequantizeLinear")
_EPS_MAX = 1e-4  # a clamp this small only touches (near-)zero vectors
_FIXED = QParams.per_tensor(1.0 / 128.0, 0)  # LiteRT's int8 L2_NORMALIZATION output grid


def _clamp_eps(g: OnnxGraph, node: onnx.NodeProto, read: str) -> float | None:
    """The lower bound of a Clip(n, eps) / Max(n, eps) on the norm ``read``, else None."""
    if node.op_type == "Clip":
        if node.input[0] != read:
            return None
        lo = _scalar(g, node.input[1]) if len(node.input) > 1 and node.input[1] else None
        hi = _scalar(g, node.input[2]) if len(node.input) > 2 and node.input[2] else None
        lo = g.attr(node).get("min", lo)
        hi = g.attr(node).get("max", hi)
        ok = lo is not None and 0 <= lo <= _EPS_MAX and (hi is None or not np.isfinite(hi)
                                                          or hi > 3e38)
        return float(lo) if ok else None
    if node.op_type == "Max" and len(node.input) == 2:
        other = node.input[1] if node.input[0] == read else node.input[0]
        eps = _scalar(g, other)
        return float(eps) if eps is not None and 0 <= eps <= _EPS_MAX else None
    return None


def _match(g: OnnxGraph, norm: onnx.NodeProto):
    """(x, axis, chain nodes, the Div) for an L2 normalization starting at ``norm``."""
    x = norm.input[0]
    shape = g.shapes.get(x)
    if shape is None:
        return None
    axes = _axes(g, norm, len(shape))
    if axes is None or len(axes) != 1:
        return None
    hops: list[onnx.NodeProto] = []
    chain, cur = [norm], norm.output[0]
    users = _users(g, cur, hops)
    if len(users) == 1 and _clamp_eps(g, users[0][0], users[0][1]) is not None:
        chain.append(users[0][0])
        cur = users[0][0].output[0]
        users = _users(g, cur, hops)
    if len(users) == 1 and users[0][0].op_type == "Expand" and users[0][0].input[0] == users[0][1]:
        chain.append(users[0][0])
        cur = users[0][0].output[0]
        users = _users(g, cur, hops)
    step = users[0] if len(users) == 1 else None
    if step is None or step[0].op_type != "Div" or step[0].input[1] != step[1]:
        return None
    div = step[0]
    if _origin(g, div.input[0]) != _origin(g, x) or \
            tuple(g.shapes.get(div.input[0], ())) != tuple(shape):
        return None
    inside = {id(n) for n in chain + hops + [div]}
    for n in chain + hops:
        for out in n.output:
            if out in g.outputs or any(id(u) not in inside for u in g.consumers.get(out, [])):
                return None
    return div.input[0], axes[0], chain + hops, div


def fuse_l2norm(g: OnnxGraph, keep_float: set[str]) -> int:
    """Replace each ``x / ReduceL2(x)`` chain by one LpNormalization named after its Div.
    Returns the count."""
    fused = 0
    for norm in [n for n in g.nodes if n.op_type == "ReduceL2"]:
        if not any(n is norm for n in g.nodes):
            continue
        found = _match(g, norm)
        if found is None:
            continue
        x, axis, nodes, div = found
        node = helper.make_node("LpNormalization", [x], [div.output[0]],
                                name=div.name or norm.name, axis=axis, p=2)
        if any(n.name in keep_float for n in [*nodes, div] if n.op_type not in _QDQ):
            keep_float.add(node.name)
        g.replace([*nodes, div], node)
        fused += 1
    return fused


def convert_lpnorm(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    if int(a.get("p", 2)) != 2:
        raise unsupported(node, "only p = 2 (L2) has a LiteRT kernel")
    x = ctx.input(node, 0)
    if x.is_const:
        x = ctx.to_layout(x, x.perm)
    axis = int(a.get("axis", -1)) % x.rank
    if x.perm[-1] != axis:  # LiteRT normalizes along its tensor's last axis
        x = ctx.to_layout(x, tuple(p for p in x.perm if p != axis) + (axis,))
    if ctx.quantized and ctx.out_params(node).s < _FIXED.s * 0.9:
        _l2norm16(ctx, node, x)
        return
    out = ctx.output(node, 0, x.perm, _FIXED if ctx.quantized else None)
    ctx.emit(Op.L2_NORMALIZATION, [x], [out], S.L2NormOptionsT())
    ctx.bind(node, 0, out)


def _l2norm16(ctx: ConversionContext, node: onnx.NodeProto, x) -> None:
    """``x * RSQRT(MEAN(x * x) + (s/2)^2) / sqrt(n)`` on int16 tensors along the last axis."""
    perm, shape = x.perm, x.onnx_shape
    axis = perm[-1]
    n = shape[axis]
    reduced = tuple(1 if d == axis else size for d, size in enumerate(shape))
    lo, hi = int8_range(x.qparams)
    r = max(abs(lo), abs(hi))
    eps = (x.qparams.s / 2) ** 2  # a row under half a step is zero as far as int8 can tell
    out = ctx.output(node, 0, perm)
    y_abs = max(abs(v) for v in int8_range(out.qparams))
    keep = S.ReducerOptionsT()
    keep.keepDims = True
    axes = ctx.int32(np.asarray([x.rank - 1], np.int32), "axes")

    def emit(builtin: int, ins: list, bound: float, what: str, s=shape, options=None):
        dst = ctx.new_value(s, perm, q16(bound), f"{node.name}_{what}16")
        ctx.emit(builtin, ins, [dst], options)
        return dst

    add = S.AddOptionsT()
    add.potScaleInt16 = False  # general int16 scales, not only powers of two
    x16 = emit(Op.QUANTIZE, [x], r, "x")
    square = emit(Op.MUL, [x16, x16], r * r, "square", options=S.MulOptionsT())
    mean = emit(Op.MEAN, [square, axes], r * r, "meansq", reduced, keep)
    eps_t = const16(ctx, np.full([1] * len(shape), eps, np.float32), perm, f"{node.name}_eps")
    mean = emit(Op.ADD, [mean, eps_t], r * r + eps, "meansq_eps", reduced, add)
    inv = emit(Op.RSQRT, [mean], 1.0 / np.sqrt(eps), "rsqrt", reduced)
    # |x| / rms <= sqrt(n); past y_abs * sqrt(n) the output QUANTIZE clips anyway
    root = float(np.sqrt(n))
    scaled = emit(Op.MUL, [x16, inv], min(root, y_abs * root) * 1.01, "scaled",
                  options=S.MulOptionsT())
    inv_root = const16(ctx, np.full([1] * len(shape), 1.0 / root, np.float32), perm,
                       f"{node.name}_inv_root")
    y = emit(Op.MUL, [scaled, inv_root], min(1.0, y_abs) * 1.01, "y", options=S.MulOptionsT())
    ctx.emit(Op.QUANTIZE, [y], [out])
    ctx.bind(node, 0, out)


def convert_reduce_l2(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    """Float SQRT(SUM(x * x)) over the axes."""
    x = ctx.input(node, 0)
    if x.is_const:
        x = ctx.to_layout(x, x.perm)
    a = ctx.attrs(node)
    axes = a.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = ctx.const(node.input[1]).tolist()
    axes = sorted(int(v) % x.rank for v in (axes if axes is not None else range(x.rank)))
    keep = bool(a.get("keepdims", 1))
    square = ctx.new_value(x.onnx_shape, x.perm, None, f"{node.name}_sq")
    ctx.emit(Op.MUL, [x, x], [square], S.MulOptionsT())
    if keep:
        out_perm = x.perm
    else:
        remaining = [ax for ax in range(x.rank) if ax not in axes]
        out_perm = tuple(remaining.index(ax) for ax in x.perm if ax not in axes)
    total = ctx.new_value(ctx.g.shape(node.output[0]), out_perm, None, f"{node.name}_sum")
    opts = S.ReducerOptionsT()
    opts.keepDims = keep
    ctx.emit(Op.SUM, [square, ctx.int32(np.asarray(sorted(x.perm.index(ax) for ax in axes),
                                                   np.int32), "axes")], [total], opts)
    out = ctx.output(node, 0, out_perm, None)
    ctx.emit(Op.SQRT, [total], [out])
    ctx.bind(node, 0, out)


SPECS = {
    "LpNormalization": OpSpec(convert_lpnorm),
    "ReduceL2": OpSpec(convert_reduce_l2, int8=False),
}
