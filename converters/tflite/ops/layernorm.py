"""LayerNormalization -> MEAN, SUB, MUL, MEAN, ADD, RSQRT, MUL (, MUL, ADD).

LiteRT has no LayerNorm kernel and an int8 decomposition would round the variance and its
reciprocal root to 8 bits. Between int8 tensors the chain is written on LiteRT's int16
kernels (``layernorm16.py``: int16 inside, int8 at its boundaries, no float op); otherwise
(no Q/DQ around it, int16 neighbours, kept float) in float between DEQUANTIZE and QUANTIZE.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import Value, identity
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.ops.layernorm16 import convert_layernorm16
from edgekit.converters.tflite.schema import Op, S


def _affine(ctx: ConversionContext, node: onnx.NodeProto, i: int, rank: int) -> Value | None:
    """Scale or bias as a constant broadcast over the normalized trailing axes."""
    if i >= len(node.input) or not node.input[i]:
        return None
    if not ctx.is_const(node.input[i]):
        raise unsupported(node, f"input {i} (scale/bias) must be a constant")
    data = np.asarray(ctx.const(node.input[i]), np.float32)
    shape = (1,) * (rank - data.ndim) + tuple(data.shape)
    return Value(shape, identity(rank), None, const=data.reshape(shape))


def convert_layernorm(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    if any(node.output[1:]):
        raise unsupported(node, "the Mean and InvStdDev outputs are not written")
    x = ctx.input(node, 0)  # int8 in quantized mode (int16 chain), else float
    rank = x.rank
    a = ctx.attrs(node)
    axis = int(a.get("axis", -1)) % rank
    # edgekit_axes: set by the hand-written LayerNorm fusion for non-trailing axes
    normalized = [int(v) % rank for v in a.get("edgekit_axes", range(axis, rank))]
    gamma, beta = _affine(ctx, node, 1, rank), _affine(ctx, node, 2, rank)
    write_normalization(ctx, node, x, normalized, float(a.get("epsilon", 1e-5)),
                        None if gamma is None else gamma.const,
                        None if beta is None else beta.const)


def write_normalization(ctx: ConversionContext, node: onnx.NodeProto, x: Value,
                        normalized: list[int], eps: float, gamma: np.ndarray | None,
                        beta: np.ndarray | None) -> None:
    """(x - mean) / sqrt(var + eps) over the ONNX axes ``normalized`` [* gamma] [+ beta]
    (constants of x's rank in ONNX layout); binds output 0 of ``node``. Int16 chain in
    quantized mode (layernorm16.py), else float builtins."""
    x = ctx.to_layout(x, x.perm) if x.is_const else x
    rank, perm = x.rank, x.perm
    axes = ctx.int32(sorted(perm.index(ax) for ax in normalized), "axes")
    keep = S.ReducerOptionsT()
    keep.keepDims = True
    reduced = tuple(1 if d in normalized else n for d, n in enumerate(x.onnx_shape))

    def tmp(shape: tuple[int, ...], what: str) -> Value:
        return ctx.new_value(shape, perm, None, f"{node.name}_{what}")

    if ctx.quantized:
        convert_layernorm16(ctx, node, x, axes, normalized, reduced, eps, gamma, beta)
        return
    mean, centred = tmp(reduced, "mean"), tmp(x.onnx_shape, "centred")
    square, var = tmp(x.onnx_shape, "square"), tmp(reduced, "var")
    var_eps, inv = tmp(reduced, "var_eps"), tmp(reduced, "rsqrt")
    ctx.emit(Op.MEAN, [x, axes], [mean], keep)
    ctx.emit(Op.SUB, [x, mean], [centred], S.SubOptionsT())
    ctx.emit(Op.MUL, [centred, centred], [square], S.MulOptionsT())
    ctx.emit(Op.MEAN, [square, axes], [var], keep)
    eps_t = ctx.w.const(np.full([1] * rank, eps, np.float32), f"{node.name}_eps")
    ctx.emit(Op.ADD, [var, eps_t], [var_eps], S.AddOptionsT())
    ctx.emit(Op.RSQRT, [var_eps], [inv])
    steps = [(Op.MUL, inv, S.MulOptionsT)]
    if gamma is not None:
        steps.append((Op.MUL, ctx.to_layout(_const(gamma), perm), S.MulOptionsT))
    if beta is not None:
        steps.append((Op.ADD, ctx.to_layout(_const(beta), perm), S.AddOptionsT))
    cur = centred
    for k, (builtin, operand, options) in enumerate(steps):
        dst = ctx.output(node, 0, perm) if k == len(steps) - 1 else tmp(x.onnx_shape, f"n{k}")
        ctx.emit(builtin, [cur, operand], [dst], options())
        cur = dst
    ctx.bind(node, 0, cur)


def _const(data: np.ndarray) -> Value:
    return Value(tuple(data.shape), identity(data.ndim), None, const=data)


SPECS = {"LayerNormalization": OpSpec(convert_layernorm)}
