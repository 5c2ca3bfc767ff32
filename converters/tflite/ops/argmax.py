"""ArgMax -> ARG_MAX with an int64 output (onnxruntime's type): the class label of a
classifier (skl2onnx's, after ml_ops.py lowers it). On an int8 input the kernel compares the
stored bytes, which orders them as their dequantized values (one scale, one zero point), so
the label is onnxruntime's on the same QDQ model; no QuantizeLinear follows an index."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import Value, identity
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.schema import Op, S


def convert_argmax(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    attrs = ctx.attrs(node)
    if int(attrs.get("select_last_index", 0)):
        raise unsupported(node, "select_last_index=1 (LiteRT's ARG_MAX takes the first)")
    x = ctx.input(node, 0)
    rank = x.rank
    if x.perm != identity(rank):  # the index is of an ONNX axis: read it in ONNX order
        x = ctx.to_layout(x, identity(rank))
    axis = int(attrs.get("axis", 0)) % rank
    reduced = tuple(d for a, d in enumerate(x.onnx_shape) if a != axis)
    out_name = node.output[0]
    keepdims = int(attrs.get("keepdims", 1))
    flat = ctx.w.tensor(reduced, "int64", None, out_name if not keepdims else f"{out_name}_flat")
    opts = S.ArgMaxOptionsT()
    opts.outputType = S.TensorType.INT64
    ctx.emit(Op.ARG_MAX, [x, ctx.int32(np.asarray([axis]), f"{node.name}_axis")], [flat], opts)
    shape, tensor = reduced, flat
    if keepdims:
        shape = tuple(1 if a == axis else d for a, d in enumerate(x.onnx_shape))
        tensor = ctx.w.tensor(shape, "int64", None, out_name)
        ctx.emit(Op.RESHAPE, [flat, ctx.int32(np.asarray(shape), "shape")], [tensor])
    ctx.values[out_name] = Value(shape, identity(len(shape)), None, tensor)


# bool_output: an index, not a value on a grid, so no QuantizeLinear follows it
SPECS = {"ArgMax": OpSpec(convert_argmax, bool_output=True)}
