"""Sqrt and Pow in int8 where LiteRT has a kernel for the case, else float.

LiteRT's POW has no int8 kernel; the exponents real models use do: Pow(x, 2) (variance in
a decomposed LayerNorm) is MUL(x, x), Pow(x, 0.5) is SQRT, Pow(x, -1) is DIV(1, x). Other
exponents are written as float POW between DEQUANTIZE and QUANTIZE. LiteRT's int8 SQRT
stops the whole model on a negative input value, so when the input's int8 range reaches
below zero a RELU clears those first (onnxruntime would produce NaN there).
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import Value, identity
from edgekit.converters.tflite.ops.base import OpSpec
from edgekit.converters.tflite.schema import Op, S

_INT8_EXPONENTS = (2.0, 0.5, -1.0)


def _exponent(ctx: ConversionContext, node: onnx.NodeProto) -> float | None:
    if not ctx.is_const(node.input[1]):
        return None
    data = np.asarray(ctx.const(node.input[1]))
    return float(data.reshape(-1)[0]) if data.size == 1 else None


def _sqrt(ctx: ConversionContext, node: onnx.NodeProto, x: Value) -> None:
    if x.qparams is not None and x.qparams.zp > -128:
        clear = ctx.new_value(x.onnx_shape, x.perm, x.qparams, f"{node.name}_nonneg")
        ctx.emit(Op.RELU, [x], [clear])
        x = clear
    out = ctx.output(node, 0, x.perm)
    ctx.emit(Op.SQRT, [x], [out])
    ctx.bind(node, 0, out)


def convert_sqrt(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)
    _sqrt(ctx, node, ctx.to_layout(x, x.perm) if x.is_const else x)


def convert_pow(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)
    x = ctx.to_layout(x, x.perm) if x.is_const else x
    e = _exponent(ctx, node)
    if e == 0.5:
        _sqrt(ctx, node, x)
        return
    rank = len(ctx.g.shape(node.output[0]))
    if e == 2.0:
        operands, builtin, opts = [x, x], Op.MUL, S.MulOptionsT()
    elif e == -1.0:
        one = np.ones([1] * rank, np.float32)
        operands, builtin, opts = [Value(one.shape, identity(rank), None, const=one), x], \
            Op.DIV, S.DivOptionsT()
    else:  # float POW (no int8 kernel)
        operands, builtin, opts = [x, ctx.float_value(node.input[1])], Op.POW, None
    operands, perm = ctx.align(operands, rank)
    out = ctx.output(node, 0, perm)
    ctx.emit(builtin, operands, [out], opts)
    ctx.bind(node, 0, out)


def _int8_exponent(ctx: ConversionContext, node: onnx.NodeProto) -> bool:
    return _exponent(ctx, node) in _INT8_EXPONENTS


SPECS = {
    "Sqrt": OpSpec(convert_sqrt),
    "Pow": OpSpec(convert_pow, can_int8=_int8_exponent),
}
