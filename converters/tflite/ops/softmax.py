"""Softmax -> SOFTMAX on the last TFLite axis, written at LiteRT's fixed int8 output scale
(1/256, zero point -128) when the graph's scale is that one; else on int16 (LiteRT's int16
SOFTMAX, output 1/32768) and requantized once to the graph's scale. An int16 input (the
accuracy guard's int16 rung) is always written on the int16 kernel."""

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
    want = ctx.out_params(node) if ctx.quantized else None
    if ctx.quantized and x.qparams is not None and x.qparams.dtype == "int16":
        # LiteRT's int16 SOFTMAX writes int16 at 1/32768 (zero point 0) only; ``bind``
        # requantizes that to the graph's grid (int16 on the rung, or int8)
        qp = QParams.per_tensor(1.0 / 32768.0, 0, "int16")
    elif want is not None and want.dtype == "int8" and x.qparams.dtype == "int8" and \
            not x.is_const and not want.same_as(qp):
        # two roundings (the fixed 1/256 grid, then the graph's scale) put some elements a
        # step off onnxruntime's one; on int16 the input moves exactly (q - zp at the same
        # scale), the output grid is 1/32768, and the QUANTIZE back is the one rounding
        x = ctx.requant(x, QParams.per_tensor(x.qparams.s, 0, "int16"))
        qp = QParams.per_tensor(1.0 / 32768.0, 0, "int16")
    out = ctx.output(node, 0, x.perm, qp)
    opts = S.SoftmaxOptionsT()
    opts.beta = 1.0
    ctx.emit(Op.SOFTMAX, [x], [out], opts)
    ctx.bind(node, 0, out)


SPECS = {"Softmax": OpSpec(convert_softmax)}
