"""Max/Min -> MAXIMUM/MINIMUM; Greater, Less, ... -> GREATER, LESS, ... (booleans); Where ->
SELECT_V2. All have int8 LiteRT kernels:

* MAXIMUM, MINIMUM and SELECT_V2 copy one of their inputs' bytes, so their int8 kernels
  want every operand at the output's parameters: each is requantized to the QuantizeLinear
  after the ONNX node first (one rounding, as onnxruntime's Q(DQ(a)) of the chosen value).
* The comparisons rescale both int8 operands themselves. A constant operand is written on
  the other operand's grid, rounded in the direction that keeps the comparison exact
  (``q > t`` for an integer ``q`` is ``q > floor(t)``), so the booleans are those of
  onnxruntime comparing the dequantized values.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import Value, identity, permute
from edgekit.converters.tflite.ops.base import OpSpec
from edgekit.converters.tflite.quant import QParams
from edgekit.converters.tflite.schema import Op

_COMPARE = {"Greater": Op.GREATER, "GreaterOrEqual": Op.GREATER_EQUAL, "Less": Op.LESS,
            "LessOrEqual": Op.LESS_EQUAL, "Equal": Op.EQUAL}
# x OP c, rounding of c's grid position that keeps the result exact for integer x
_ROUND = {"Greater": math.floor, "LessOrEqual": math.floor, "Less": math.ceil,
          "GreaterOrEqual": math.ceil, "Equal": round}
_MIRROR = {"Greater": "Less", "Less": "Greater", "GreaterOrEqual": "LessOrEqual",
           "LessOrEqual": "GreaterOrEqual", "Equal": "Equal"}


def _operands_int8(ctx: ConversionContext, node: onnx.NodeProto,
                   indices: tuple[int, ...]) -> bool:
    """Each of ``indices`` is an int8 activation (from a DequantizeLinear) or a constant,
    and at least one is an activation."""
    active = 0
    for i in indices:
        name = node.input[i]
        dq = ctx.g.dq(name)
        if dq is not None and dq.source not in ctx.g.const:
            active += 1
        elif not ctx.is_const(name):
            return False
    return active > 0


def convert_minmax(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    builtin = Op.MAXIMUM if node.op_type == "Max" else Op.MINIMUM
    rank = len(ctx.g.shape(node.output[0]))
    values = [ctx.input(node, i) for i in range(len(node.input)) if node.input[i]]
    qp = ctx.out_params(node)
    if qp is not None:
        values = [ctx.requant(v, qp) for v in values]
    values, perm = ctx.align(values, rank)
    if len(values) == 1:
        values = values * 2  # Max(x) is x
    cur = values[0]
    for k, v in enumerate(values[1:], start=2):
        last = k == len(values)
        shape = tuple(np.broadcast_shapes(cur.onnx_shape, v.onnx_shape))
        dst = ctx.output(node, 0, perm) if last else \
            ctx.new_value(shape, perm, qp, f"{node.name}_{k}")
        ctx.emit(builtin, [cur, v], [dst])
        cur = dst
    ctx.bind(node, 0, cur)


def _on_grid(value: float, qp: QParams, how) -> np.ndarray:
    """The integer position of ``value`` on ``qp``'s grid, rounded by ``how``."""
    return np.asarray(np.clip(how(value / qp.s + qp.zp), -128, 127), np.int8)


def convert_compare(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a, b = ctx.input(node, 0), ctx.input(node, 1)
    if ctx.quantized and (a.is_const or b.is_const):
        # the constant on the activation's grid, rounded so that the booleans are exact
        var, k = (b, 0) if a.is_const else (a, 1)
        op = node.op_type if k == 1 else _MIRROR[node.op_type]
        real = np.asarray(ctx.const(node.input[k]), np.float64)
        q = np.vectorize(lambda r: _on_grid(float(r), var.qparams, _ROUND[op]))(real)
        const = Value(tuple(real.shape), identity(real.ndim), var.qparams,
                      const=np.asarray(q, np.int8).reshape(real.shape))
        a, b = (const, b) if k == 0 else (a, const)
    rank = len(ctx.g.shape(node.output[0]))
    (a, b), perm = ctx.align([a, b], rank)
    shape = ctx.g.shape(node.output[0])
    tensor = ctx.w.tensor(permute(shape, perm), "bool", None, node.output[0])
    out = Value(tuple(shape), perm, None, tensor)
    ctx.emit(_COMPARE[node.op_type], [a, b], [out])
    ctx.values[node.output[0]] = out  # booleans: no QuantizeLinear follows


def convert_where(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    cond, x, y = (ctx.input(node, i) for i in range(3))
    qp = ctx.out_params(node)
    if qp is not None:
        x, y = ctx.requant(x, qp), ctx.requant(y, qp)
    rank = len(ctx.g.shape(node.output[0]))
    (cond, x, y), perm = ctx.align([cond, x, y], rank)
    out = ctx.output(node, 0, perm)
    ctx.emit(Op.SELECT_V2, [cond, x, y], [out])
    ctx.bind(node, 0, out)


SPECS = {
    "Max": OpSpec(convert_minmax, dq_inputs=(),
                  can_int8=lambda ctx, n: _operands_int8(ctx, n, tuple(range(len(n.input))))),
    "Min": OpSpec(convert_minmax, dq_inputs=(),
                  can_int8=lambda ctx, n: _operands_int8(ctx, n, tuple(range(len(n.input))))),
    **{op: OpSpec(convert_compare, dq_inputs=(), bool_output=True,
                  can_int8=lambda ctx, n: _operands_int8(ctx, n, (0, 1))) for op in _COMPARE},
    "Where": OpSpec(convert_where, dq_inputs=(),
                    can_int8=lambda ctx, n: _operands_int8(ctx, n, (1, 2))),
}
