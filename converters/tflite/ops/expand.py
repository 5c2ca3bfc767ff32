"""Expand -> BROADCAST_TO in the input's layout. It only repeats bytes, so the int8 form keeps
the input's parameters (requantized after when the graph's QuantizeLinear differs), as
RESHAPE does; LiteRT's BROADCAST_TO takes int8 (version 2)."""

from __future__ import annotations

import onnx
from edgekit.converters.tflite.context import ConversionContext, _reshape_options
from edgekit.converters.tflite.layout import identity, permute
from edgekit.converters.tflite.ops.base import OpSpec
from edgekit.converters.tflite.schema import Op


def convert_expand(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)
    shape = tuple(ctx.g.shape(node.output[0]))
    if x.is_const:
        x = ctx.to_layout(x, identity(x.rank))
    if x.rank < len(shape):  # numpy broadcasting: leading axes of size 1 first
        wide = (1,) * (len(shape) - x.rank) + tuple(x.onnx_shape)
        flat = ctx.to_layout(x, identity(x.rank))
        x = ctx.new_value(wide, identity(len(shape)), x.qparams, f"{flat.tensor.name}_r")
        ctx.emit(Op.RESHAPE, [flat, ctx.int32(wide, "shape")], [x], _reshape_options(wide))
    out = ctx.output(node, 0, x.perm, x.qparams)
    if tuple(x.onnx_shape) == shape:  # nothing to repeat
        ctx.emit(Op.RESHAPE, [x, ctx.int32(out.shape, "shape")], [out],
                 _reshape_options(out.shape))
    else:
        # version 2: LiteRT registers BROADCAST_TO from version 2 only
        ctx.emit(Op.BROADCAST_TO, [x, ctx.int32(permute(shape, x.perm), "shape")], [out],
                 version=2)
    ctx.bind(node, 0, out)


SPECS = {"Expand": OpSpec(convert_expand)}
