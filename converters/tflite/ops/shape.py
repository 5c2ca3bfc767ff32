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
        # keep the layout: move only what the reshape needs (one TRANSPOSE at most, none
        # when it splits or merges axes that are already adjacent, as in NHWC channel
        # shuffles or [N, C, H, W] -> [N, C, H*W])
        x, out_perm = _layout_through_reshape(ctx, x, out_shape)
    else:
        out_perm = identity(rank_out)
    out = ctx.output(node, 0, out_perm, x.qparams)
    ctx.emit(Op.RESHAPE, [x, ctx.int32(out.shape, "shape")], [out], _reshape_options(out.shape))
    ctx.bind(node, 0, out)


def _reshape_groups(src: tuple[int, ...], dst: tuple[int, ...]
                    ) -> list[tuple[list[int], list[int]]] | None:
    """A reshape as groups of consecutive source axes and destination axes of equal size."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(src) and j < len(dst):
        gi, gj, pi, pj = [i], [j], src[i], dst[j]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj and i < len(src):
                pi, i = pi * src[i], i + 1
                gi.append(i - 1)
            elif pj < pi and j < len(dst):
                pj, j = pj * dst[j], j + 1
                gj.append(j - 1)
            else:
                return None
        groups.append((gi, gj))
    if not groups or any(src[k] != 1 for k in range(i, len(src))) or \
            any(dst[k] != 1 for k in range(j, len(dst))):
        return None
    groups[-1][0].extend(range(i, len(src)))  # trailing size-1 axes
    groups[-1][1].extend(range(j, len(dst)))
    return groups


def _layout_through_reshape(ctx: ConversionContext, x: Value, out_shape: tuple[int, ...]
                            ) -> tuple[Value, tuple[int, ...]]:
    """(input in a layout whose bytes the reshape keeps, the output's layout). Groups of
    axes the reshape merges or splits must sit together and in ONNX order in the TFLite
    tensor; groups keep the order they already have."""
    src = x.onnx_shape
    groups = _reshape_groups(src, tuple(out_shape))
    if groups is None:
        return ctx.to_layout(x, identity(x.rank)), identity(len(out_shape))
    group_of = {a: g for g, (axes, _) in enumerate(groups) for a in axes}
    first: dict[int, int] = {}
    for pos, axis in enumerate(x.perm):
        if src[axis] != 1 or all(src[a] == 1 for a in groups[group_of[axis]][0]):
            first.setdefault(group_of[axis], pos)
    order = sorted(range(len(groups)), key=lambda g: first.get(g, len(x.perm)))
    wanted = tuple(a for g in order for a in groups[g][0])
    if not order_preserving(src, x.perm, wanted):
        x = ctx.to_layout(x, wanted)
    return x, tuple(a for g in order for a in groups[g][1])


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


def joins_integer_outputs(ctx: ConversionContext, node: onnx.NodeProto) -> bool:
    """A float Concat that writes a graph output from integer tensors alone: the packed-output
    split's Concat (split_packed.py), kept float so that boxes and class scores keep their own
    int8 scales, which one int8 grid would crush."""
    return node.op_type == "Concat" and node.output[0] in ctx.g.outputs and all(
        name and ctx.g.dq(name) is not None and ctx.g.dq(name).source not in ctx.g.const
        for name in node.input)


def convert_output_concat16(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    """That Concat on integer kernels: each branch QUANTIZEd onto one symmetric int16 grid
    covering every branch's range, CONCATENATION in int16, one DEQUANTIZE to the float output
    (a 325-pixel box range leaves the class scores a 0.01 step: finer than the 8-bit steps any
    one grid would give them, and no float compute op)."""
    from edgekit.converters.tflite.quant import QParams
    from edgekit.converters.tflite.sixteen import INT16_MAX

    values = [ctx.value(ctx.g.dq(name).source) for name in node.input]
    bound = 0.0
    for v in values:
        qp = v.qparams
        top = qp.s * INT16_MAX if qp.dtype == "int16" else qp.s * max(abs(-128 - qp.zp), abs(127 - qp.zp))
        bound = max(bound, top)
    grid = QParams.per_tensor(max(bound, 1e-12) / INT16_MAX, 0, "int16")
    rank = len(ctx.g.shape(node.output[0]))
    values, perm = ctx.align(values, rank)
    values = [ctx.requant(v, grid) for v in values]
    joined = ctx.new_value(ctx.g.shape(node.output[0]), perm, grid, f"{node.name}_16")
    opts = S.ConcatenationOptionsT()
    opts.axis = perm.index(int(ctx.attrs(node)["axis"]) % rank)
    ctx.emit(Op.CONCATENATION, values, [joined], opts)
    out = ctx.output(node, 0, perm, None)
    ctx.emit(Op.DEQUANTIZE, [joined], [out])
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
