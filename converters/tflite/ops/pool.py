"""MaxPool, AveragePool -> MAX_POOL_2D / AVERAGE_POOL_2D (1-D ones with H = 1); GlobalAveragePool, ReduceMean ->
MEAN; GlobalMaxPool, ReduceMax -> REDUCE_MAX. Pools keep the input's int8 parameters
(LiteRT's int8 pooling does not rescale) and requantize after if the graph differs."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import NHWC, Perm
from edgekit.converters.tflite.ops.base import (
    OpSpec,
    ints,
    pad_nhwc,
    same_pads,
    spatial_padding,
    unsupported,
)
from edgekit.converters.tflite.ops.lift1d import lift, lifted_attrs, lifted_shape, lower
from edgekit.converters.tflite.schema import Op, Padding, S


def convert_pool(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    out_shape = tuple(ctx.g.shape(node.output[0]))
    one_d = x.rank == 3  # MaxPool1d/AvgPool1d: the 2-D kernel with H = 1 (lift1d.py)
    if one_d:
        x, a, out_shape = lift(ctx, x), lifted_attrs(node, a), lifted_shape(out_shape)
    elif x.rank != 4:
        raise unsupported(node, f"only 1-D and 2-D pooling (3-D or 4-D input) is written, "
                                f"got rank {x.rank}")
    if any(d != 1 for d in ints(a.get("dilations"))):
        raise unsupported(node, "dilated pooling has no LiteRT kernel")
    x = ctx.to_layout(x, NHWC)
    kernel, strides = ints(a["kernel_shape"]), ints(a.get("strides"))
    padding, explicit = spatial_padding(node, a, x.onnx_shape[2:], out_shape[2:], kernel,
                                        strides, (1, 1))
    is_max = node.op_type == "MaxPool"
    if explicit:
        if is_max:
            x = pad_nhwc(ctx, x, explicit, fill=float("-inf") if x.quantized else -3.4e38)
        elif a.get("count_include_pad", 0):
            x = pad_nhwc(ctx, x, explicit)
        else:
            raise unsupported(node, "asymmetric padding with count_include_pad=0 has no "
                                    "LiteRT equivalent")
    elif padding == Padding.SAME and not is_max and a.get("count_include_pad", 0):
        x = pad_nhwc(ctx, x, [same_pads(x.onnx_shape[2 + d], kernel[d], strides[d], 1)[1:]
                              for d in range(2)])
        padding = Padding.VALID
    out = ctx.output(node, 0, NHWC, x.qparams, onnx_shape=out_shape)
    opts = S.Pool2DOptionsT()
    opts.padding, opts.strideH, opts.strideW = padding, strides[0], strides[1]
    opts.filterHeight, opts.filterWidth = kernel
    ctx.emit(Op.MAX_POOL_2D if is_max else Op.AVERAGE_POOL_2D, [x], [out], opts)
    ctx.bind(node, 0, lower(ctx, out, ctx.g.shape(node.output[0])) if one_d else out)


def convert_reduce(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    rank = x.rank
    if node.op_type.startswith("Global"):
        axes, keep = list(range(2, rank)), True
    else:
        axes = a.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = ctx.const(node.input[1]).tolist()
        axes = sorted(int(v) % rank for v in (axes if axes is not None else range(rank)))
        keep = bool(a.get("keepdims", 1))
    if x.rank == 4 and x.perm != NHWC and set(axes) == {2, 3}:
        x = ctx.to_layout(x, NHWC)  # XNNPACK reduces NHWC spatial axes natively
    perm = x.perm
    tfl_axes = sorted(perm.index(ax) for ax in axes)
    if keep:
        out_perm: Perm = perm
    else:
        remaining = [ax for ax in range(rank) if ax not in axes]
        out_perm = tuple(remaining.index(ax) for ax in perm if ax not in axes)
    is_mean = node.op_type in ("GlobalAveragePool", "ReduceMean")
    # MEAN rescales in int8; REDUCE_MAX keeps the input parameters
    out = ctx.output(node, 0, out_perm, "auto" if is_mean else x.qparams)
    opts = S.ReducerOptionsT()
    opts.keepDims = keep
    ctx.emit(Op.MEAN if is_mean else Op.REDUCE_MAX,
             [x, ctx.int32(np.asarray(tfl_axes, np.int32), "axes")], [out], opts)
    ctx.bind(node, 0, out)


SPECS = {
    "MaxPool": OpSpec(convert_pool),
    "AveragePool": OpSpec(convert_pool),
    "GlobalAveragePool": OpSpec(convert_reduce),
    "GlobalMaxPool": OpSpec(convert_reduce),
    "ReduceMean": OpSpec(convert_reduce),
    "ReduceMax": OpSpec(convert_reduce),
}
