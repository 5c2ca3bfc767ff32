"""Softmax -> SOFTMAX on the last TFLite axis, written at LiteRT's fixed int8 output scale
(1/256, zero point -128) and requantized to the graph's scale when that differs."""

from __future__ import annotations

import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.quant import FIXED_SOFTMAX, QParams
from edgekit.converters.tflite.schema import Op, S


def convert_softmax(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)
    rank = x.rank
    default = -1 if ctx.g.opset >= 13 else 1
    axis = int(ctx.attrs(node).get("axis", default)) % rank
    if ctx.g.opset < 13 and axis != rank - 1 and rank > 2:
        raise unsupported(node, "opset < 13 softmax over several axes is not written")
    if x.perm.index(axis) != rank - 1:
        # move the softmax axis last; for NCHW channel softmax NHWC already does that
        order = tuple(a for a in range(rank) if a != axis) + (axis,)
        x = ctx.to_layout(x, order)
    qp = QParams.per_tensor(*FIXED_SOFTMAX) if ctx.quantized else None
    out = ctx.output(node, 0, x.perm, qp)
    opts = S.SoftmaxOptionsT()
    opts.beta = 1.0
    ctx.emit(Op.SOFTMAX, [x], [out], opts)
    ctx.bind(node, 0, out)


SPECS = {"Softmax": OpSpec(convert_softmax)}
