"""Binary elementwise ops (Add, Sub, Mul in int8) and float-only unary math. Div, Sqrt and
Pow have their own modules (ops/divide.py, ops/power.py)."""

from __future__ import annotations

import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.ops.base import OpSpec
from edgekit.converters.tflite.schema import Op, S

_BINARY = {
    "Add": (Op.ADD, S.AddOptionsT),
    "Sub": (Op.SUB, S.SubOptionsT),
    "Mul": (Op.MUL, S.MulOptionsT),
}
# float-only: LiteRT has float kernels; onnxruntime leaves these float too
_UNARY = {"Exp": Op.EXP, "Log": Op.LOG, "Neg": Op.NEG, "Abs": Op.ABS,
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


SPECS = {
    "Add": OpSpec(convert_binary, dq_inputs=None, fusable=True),
    "Sub": OpSpec(convert_binary, dq_inputs=None, fusable=True),
    "Mul": OpSpec(convert_binary, dq_inputs=None, fusable=True),
    **{op: OpSpec(convert_unary, int8=False) for op in _UNARY},
}
