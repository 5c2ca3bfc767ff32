"""Reshape, Flatten, Squeeze, Unsqueeze -> RESHAPE; Transpose -> nothing (the layout is
composed) or TRANSPOSE; Identity/Dropout -> alias; Concat -> CONCATENATION.

All keep the input's int8 parameters (LiteRT copies bytes), requantizing after if needed.
A Flatten/Reshape from an NHWC tensor that feeds only fully connected layers is written on
the NHWC bytes and those layers permute their weight columns: no TRANSPOSE at all.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext, _reshape_options
from edgekit.converters.tflite.layout import Value, identity, inverse, order_preserving
from edgekit.converters.tflite.ops.base import OpSpec
from edgekit.converters.tflite.schema import Op, S


def convert_reshape(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)
    out_shape = ctx.g.shape(node.output[0])
    rank_out = len(out_shape)
    plain = identity(x.rank)
    if x.is_const:
        x = ctx.to_layout(x, plain)
    elif x.perm != plain and not order_preserving(x.onnx_shape, x.perm, plain):
        # (only with the batch axis first: the columns are then the remaining axes)
        if _feeds_only_fc(ctx, node) and rank_out == 2 and x.perm[0] == 0 and \
                out_shape[0] == x.onnx_shape[0]:
            out = ctx.output(node, 0, identity(2), x.qparams)
            ctx.emit(Op.RESHAPE, [x, ctx.int32(out.shape, "shape")], [out],
                     _reshape_options(out.shape))
            # tflite column j holds ONNX column feature_perm[j]
            inner = tuple(x.onnx_shape[1:])
            order = [p - 1 for p in x.perm[1:]]
            out.feature_perm = np.arange(int(np.prod(inner))).reshape(inner).transpose(
                order).reshape(-1)
            ctx.bind(node, 0, out)
            return
        x = ctx.to_layout(x, plain)
    out = ctx.output(node, 0, identity(rank_out), x.qparams)
    ctx.emit(Op.RESHAPE, [x, ctx.int32(out.shape, "shape")], [out], _reshape_options(out.shape))
    ctx.bind(node, 0, out)


def _feeds_only_fc(ctx: ConversionContext, node: onnx.NodeProto) -> bool:
    """Every consumer (through Q -> DQ pairs) is a Gemm/MatMul reading it as input A with
    a constant weight, converted in the same mode as this node."""
    g = ctx.g
    frontier, seen_fc = [node.output[0]], False
    while frontier:
        name = frontier.pop()
        if name in g.outputs:
            return False
        for user in g.consumers.get(name, []):
            if user.op_type in ("QuantizeLinear", "DequantizeLinear"):
                frontier.append(user.output[0])
            elif (user.op_type in ("Gemm", "MatMul") and user.input[0] == name
                  and ctx.is_const(user.input[1]) and ctx.is_int8(user) == ctx.quantized
                  and not ctx.attrs(user).get("transA", 0)):
                seen_fc = True
            else:
                return False
    return seen_fc


def convert_transpose(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)
    perm = tuple(int(p) for p in ctx.attrs(node).get("perm", reversed(range(x.rank))))
    if x.is_const:
        x = ctx.to_layout(x, identity(x.rank))
    # out = onnx_in.transpose(perm); the TFLite bytes are onnx_in.transpose(x.perm)
    inv = inverse(perm)
    new_perm = tuple(inv[a] for a in x.perm)
    shape = ctx.g.shape(node.output[0])
    alias = Value(shape, new_perm, x.qparams, x.tensor)
    ctx.bind(node, 0, alias)


def convert_identity(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)
    if x.is_const:
        x = ctx.to_layout(x, x.perm)
    ctx.bind(node, 0, Value(x.onnx_shape, x.perm, x.qparams, x.tensor,
                            feature_perm=x.feature_perm))


def convert_concat(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    values = [ctx.input(node, i) for i in range(len(node.input)) if node.input[i]]
    rank = len(ctx.g.shape(node.output[0]))
    values, perm = ctx.align(values, rank)
    qp = ctx.out_params(node)
    if qp is not None:  # LiteRT's int8 concatenation needs one set of parameters
        values = [ctx.requant(v, qp) for v in values]
    out = ctx.output(node, 0, perm)
    opts = S.ConcatenationOptionsT()
    opts.axis = perm.index(int(ctx.attrs(node)["axis"]) % rank)
    ctx.emit(Op.CONCATENATION, values, [out], opts)
    ctx.bind(node, 0, out)


SPECS = {
    "Reshape": OpSpec(convert_reshape),
    "Flatten": OpSpec(convert_reshape),
    "Squeeze": OpSpec(convert_reshape),
    "Unsqueeze": OpSpec(convert_reshape),
    "Transpose": OpSpec(convert_transpose),
    "Identity": OpSpec(convert_identity),
    "Dropout": OpSpec(convert_identity),
    "Concat": OpSpec(convert_concat, dq_inputs=None),
}
