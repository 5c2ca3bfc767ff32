"""PRelu -> PRELU (LiteRT has an int8 kernel: int8 input, int8 slope with its own scale).

onnxruntime leaves PRelu unquantized (DQ -> PRelu -> Q); the slope is a float constant
here, quantized per tensor over its own range (and zero), which moves a negative output by
at most half a slope step times |x|: a small fraction of one output step.
"""

from __future__ import annotations

import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.schema import Op


def convert_prelu(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    if not ctx.is_const(node.input[1]):
        raise unsupported(node, "the slope must be a constant")
    x = ctx.input(node, 0)
    x = ctx.to_layout(x, x.perm) if x.is_const else x
    slope = ctx.input(node, 1)  # int8 constant (materialized at its own range) or float
    rank = len(ctx.g.shape(node.output[0]))
    if rank > 4:
        raise unsupported(node, f"PRELU broadcasts up to rank 4, got rank {rank}")
    (x, slope), perm = ctx.align([x, slope], rank)
    out = ctx.output(node, 0, perm)
    ctx.emit(Op.PRELU, [x, slope], [out])
    ctx.bind(node, 0, out)


def _slope_is_const(ctx: ConversionContext, node: onnx.NodeProto) -> bool:
    return ctx.is_const(node.input[1])


SPECS = {"PRelu": OpSpec(convert_prelu, can_int8=_slope_is_const)}
