"""Gather with constant indices -> GATHER in the input's layout (int8 keeps the input's
parameters: it only copies bytes). PyTorch exports ``qkv[0]`` of an attention block so."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.schema import Op, S


def convert_gather(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    if not ctx.is_const(node.input[1]):
        # model inputs are written float32: integer index tensors cannot reach here
        raise unsupported(node, "indices must be a constant")
    x = ctx.input(node, 0)
    if x.is_const:
        x = ctx.to_layout(x, x.perm)
    axis = int(ctx.attrs(node).get("axis", 0)) % x.rank
    dim = x.onnx_shape[axis]
    idx = np.asarray(ctx.const(node.input[1])).astype(np.int64)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise unsupported(node, f"indices outside [-{dim}, {dim})")
    idx = np.where(idx < 0, idx + dim, idx).astype(np.int32)  # GATHER takes no negatives
    q = idx.ndim
    t = x.perm.index(axis)

    def moved(a: int) -> int:  # ONNX input axis -> ONNX output axis
        return a if a < axis else a + q - 1

    # TFLite output = x_tfl.shape[:t] + idx.shape + x_tfl.shape[t+1:]
    perm = (tuple(moved(a) for a in x.perm[:t]) + tuple(axis + i for i in range(q))
            + tuple(moved(a) for a in x.perm[t + 1:]))
    out = ctx.output(node, 0, perm, x.qparams)
    opts = S.GatherOptionsT()
    opts.axis = t
    ctx.emit(Op.GATHER, [x, ctx.w.const(idx, f"{node.name}_indices")], [out], opts)
    ctx.bind(node, 0, out)


SPECS = {"Gather": OpSpec(convert_gather)}
