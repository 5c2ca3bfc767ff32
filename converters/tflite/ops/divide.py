"""Div and Reciprocal in int8 (onnxruntime leaves both unquantized: DQ -> Div -> Q).

Division by a constant is a MUL by its reciprocal (one rounding, cheaper than DIV; this is
how ``relu6(x + 3) / 6`` and ``x / sqrt(d)`` appear in exports). Division by an activation
is LiteRT's int8 DIV; Reciprocal is DIV of the constant 1 (its int8 code 127 at scale 1/255
holds it exactly). A constant dividend or divisor is quantized over its own range.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import Value, identity
from edgekit.converters.tflite.ops.base import OpSpec
from edgekit.converters.tflite.schema import Op, S


def _binary(ctx: ConversionContext, node: onnx.NodeProto, a: Value, b: Value, builtin: int,
            options) -> None:
    rank = len(ctx.g.shape(node.output[0]))
    (a, b), perm = ctx.align([a, b], rank)
    out = ctx.output(node, 0, perm)
    options.fusedActivationFunction = ctx.fused_act
    ctx.emit(builtin, [a, b], [out], options)
    ctx.bind(node, 0, out)


def _const(data: np.ndarray) -> Value:
    data = np.asarray(data, np.float32)
    return Value(tuple(data.shape), identity(data.ndim), None, const=data)


def convert_div(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    if ctx.is_const(node.input[1]) and not ctx.is_const(node.input[0]):
        divisor = np.asarray(ctx.const(node.input[1]), np.float64)
        with np.errstate(divide="ignore"):
            inverse = _const(1.0 / divisor)
        _binary(ctx, node, ctx.input(node, 0), inverse, Op.MUL, S.MulOptionsT())
        return
    _binary(ctx, node, _operand(ctx, node, 0), _operand(ctx, node, 1), Op.DIV,
            S.DivOptionsT())


def _operand(ctx: ConversionContext, node: onnx.NodeProto, i: int) -> Value:
    """A constant operand as float data (quantized over its own range when written), or
    the input in the node's mode."""
    if ctx.is_const(node.input[i]):
        return _const(ctx.const(node.input[i]))
    return ctx.input(node, i)


def convert_reciprocal(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)
    one = _const(np.ones([1] * x.rank, np.float32))
    _binary(ctx, node, one, x, Op.DIV, S.DivOptionsT())


def _inputs_int8(ctx: ConversionContext, node: onnx.NodeProto) -> bool:
    """Every input is a constant or comes from a DequantizeLinear, one is not constant."""
    names = [n for n in node.input if n]
    if all(ctx.is_const(n) for n in names):
        return False
    return all(ctx.is_const(n) or ctx.g.dq(n) is not None for n in names)


SPECS = {
    "Div": OpSpec(convert_div, dq_inputs=(), fusable=True, can_int8=_inputs_int8),
    "Reciprocal": OpSpec(convert_reciprocal),
}
