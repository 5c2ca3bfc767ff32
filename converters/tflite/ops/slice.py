"""Slice -> STRIDED_SLICE and Split -> SPLIT_V, in the input's layout (same int8 parameters:
both only copy bytes)."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.schema import Op, S


def convert_slice(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    if x.is_const:
        x = ctx.to_layout(x, x.perm)
    rank = x.rank
    if len(node.input) > 1:  # opset >= 10: starts, ends, axes, steps are inputs

        def arg(i: int, default):
            ok = i < len(node.input) and node.input[i]
            return [int(v) for v in ctx.const(node.input[i]).reshape(-1)] if ok else default

        starts, ends = arg(1, None), arg(2, None)
        axes = arg(3, list(range(len(starts))))
        steps = arg(4, [1] * len(starts))
    else:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes, steps = list(a.get("axes", range(len(starts)))), [1] * len(starts)
    begin, end, stride = [0] * rank, list(x.onnx_shape), [1] * rank
    for s, e, ax, st in zip(starts, ends, axes, steps, strict=True):
        ax %= rank
        dim = x.onnx_shape[ax]
        if st <= 0:
            raise unsupported(node, "negative or zero steps are not written")
        s = min(max(s + dim if s < 0 else s, 0), dim)
        e = min(max(e + dim if e < 0 else e, 0), dim)
        begin[ax], end[ax], stride[ax] = s, e, st
    out = ctx.output(node, 0, x.perm, x.qparams)
    perm = x.perm
    ctx.emit(Op.STRIDED_SLICE, [x, ctx.int32([begin[p] for p in perm], "begin"),
                                ctx.int32([end[p] for p in perm], "end"),
                                ctx.int32([stride[p] for p in perm], "strides")],
             [out], S.StridedSliceOptionsT())
    ctx.bind(node, 0, out)


def convert_split(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    if x.is_const:
        x = ctx.to_layout(x, x.perm)
    axis = int(a.get("axis", 0)) % x.rank
    shapes = [ctx.g.shape(o) for o in node.output]
    sizes = np.asarray([s[axis] for s in shapes], np.int32)
    outs = [ctx.output(node, i, x.perm, x.qparams) for i in range(len(node.output))]
    opts = S.SplitVOptionsT()
    opts.numSplits = len(outs)
    ctx.emit(Op.SPLIT_V, [x, ctx.int32(sizes, "sizes"), ctx.int32(x.perm.index(axis), "axis")],
             outs, opts)
    for i, out in enumerate(outs):
        ctx.bind(node, i, out)


SPECS = {"Slice": OpSpec(convert_slice), "Split": OpSpec(convert_split)}
