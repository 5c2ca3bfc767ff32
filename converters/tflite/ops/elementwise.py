"""Binary elementwise ops (Add, Sub, Mul in int8), Neg (int8 as a MUL by -1) and float-only
unary math. Div, Sqrt and Pow have their own modules (ops/divide.py, ops/power.py)."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.ops.base import OpSpec
from edgekit.converters.tflite.quant import INT8_MAX, QParams
from edgekit.converters.tflite.schema import Op, S
from edgekit.converters.tflite.sixteen import INT16_MAX

_BINARY = {
    "Add": (Op.ADD, S.AddOptionsT),
    "Sub": (Op.SUB, S.SubOptionsT),
    "Mul": (Op.MUL, S.MulOptionsT),
}
# float-only: LiteRT has float kernels; onnxruntime leaves these float too
_UNARY = {"Exp": Op.EXP, "Log": Op.LOG, "Abs": Op.ABS,
          "Floor": Op.FLOOR, "Sin": Op.SIN, "Cos": Op.COS}


def convert_binary(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    builtin, options = _BINARY[node.op_type]
    a, b = ctx.input(node, 0), ctx.input(node, 1)
    rank = len(ctx.g.shape(node.output[0]))
    (a, b), perm = ctx.align([a, b], rank)
    out = ctx.output(node, 0, perm)
    opts = options()
    opts.fusedActivationFunction = ctx.fused_act
    if out.qparams is not None and out.qparams.dtype == "int16" and node.op_type in ("Add", "Sub"):
        opts.potScaleInt16 = False  # general int16 scales, not only powers of two
    ctx.emit(builtin, [a, b], [out], opts)
    ctx.bind(node, 0, out)


def convert_unary(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)
    x = ctx.to_layout(x, x.perm) if x.is_const else x
    out = ctx.output(node, 0, x.perm)
    ctx.emit(_UNARY[node.op_type], [x], [out])
    ctx.bind(node, 0, out)


def convert_neg(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    """NEG in float. In int8 (int16) a MUL by -1 held exactly (code -127 at scale 1/127):
    LiteRT's integer NEG negates the codes and ignores both tensors' scales and zero points,
    so it is right only at the input's scale with the zero point negated, which int8 cannot
    hold for an input zero point of -128 (onnxruntime's uint8 zero point 0). The MUL rounds
    once to the output's parameters, as onnxruntime's Q(-DQ(x)) does. Rotary embeddings'
    rotate_half (Moonshine: cat(-x2, x1)) feeds a Neg from a quantized Slice."""
    x = ctx.input(node, 0)
    x = ctx.to_layout(x, x.perm) if x.is_const else x
    out = ctx.output(node, 0, x.perm)
    if not ctx.quantized:
        ctx.emit(Op.NEG, [x], [out])
        ctx.bind(node, 0, out)
        return
    dtype = out.qparams.dtype
    top = INT16_MAX if dtype == "int16" else INT8_MAX
    minus_one = ctx.w.const(np.full([1] * x.rank, -top, dtype), f"{node.name}_minus_one",
                            QParams.per_tensor(1.0 / top, 0, dtype))
    ctx.emit(Op.MUL, [x, minus_one], [out], S.MulOptionsT())
    ctx.bind(node, 0, out)


SPECS = {
    "Neg": OpSpec(convert_neg),
    "Add": OpSpec(convert_binary, dq_inputs=None, fusable=True),
    "Sub": OpSpec(convert_binary, dq_inputs=None, fusable=True),
    "Mul": OpSpec(convert_binary, dq_inputs=None, fusable=True),
    **{op: OpSpec(convert_unary, int8=False) for op in _UNARY},
}
