"""1-D convolutions and pools (3-D ``[N, C, L]`` tensors) written as their 2-D kernels with
H = 1, as TensorFlow's own Conv1D is: CONV_2D / DEPTHWISE_CONV_2D / MAX_POOL_2D over
``[N, 1, L, C]``.

A 1-D activation is held channels-last, ``(0, 2, 1)`` = ``[N, L, C]``: those bytes are the
NHWC ``[N, 1, L, C]`` of the lifted tensor, so lifting and lowering are each one RESHAPE (no
TRANSPOSE), and a chain of 1-D layers stays channels-last from end to end. A RESHAPE copies
bytes and keeps the int8 parameters, so it adds no rounding.
"""

from __future__ import annotations

import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import NHWC, Perm, Value
from edgekit.converters.tflite.ops.base import unsupported
from edgekit.converters.tflite.schema import Op, S

NLC: Perm = (0, 2, 1)  # [N, C, L] held as [N, L, C]


def lifted_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """ONNX ``[N, C, L]`` -> ``[N, C, 1, L]``; a 1-D weight ``[O, I, K]`` -> ``[O, I, 1, K]``."""
    return (*shape[:2], 1, *shape[2:])


def lifted_attrs(node: onnx.NodeProto, attrs: dict) -> dict:
    """A 1-D node's spatial attributes as those of its H = 1 twin (kernel 1 x k, stride 1 x s,
    pads [0, begin, 0, end])."""
    out = dict(attrs)
    for key in ("kernel_shape", "strides", "dilations", "output_padding"):
        if key in attrs:
            values = [int(v) for v in attrs[key]]
            if len(values) != 1:
                raise unsupported(node, f"1-D {key} must have one value, got {values}")
            out[key] = [0 if key == "output_padding" else 1, values[0]]
    if "pads" in attrs:
        begin, end = (int(v) for v in attrs["pads"])
        out["pads"] = [0, begin, 0, end]
    return out


def lift(ctx: ConversionContext, x: Value) -> Value:
    """A 3-D activation as the NHWC ``[N, 1, L, C]`` tensor of its H = 1 twin."""
    x = ctx.to_layout(x, NLC)
    shape4 = lifted_shape(x.onnx_shape)
    out = ctx.new_value(shape4, NHWC, x.qparams, f"{x.tensor.name}_2d")
    _reshape(ctx, x, out)
    return out


def lower(ctx: ConversionContext, y: Value, shape3: tuple[int, ...]) -> Value:
    """The NHWC result of a lifted op back as a 3-D value held channels-last."""
    out = ctx.new_value(tuple(shape3), NLC, y.qparams, f"{y.tensor.name}_1d")
    _reshape(ctx, y, out)
    return out


def _reshape(ctx: ConversionContext, src: Value, dst: Value) -> None:
    opts = S.ReshapeOptionsT()
    opts.newShape = [int(d) for d in dst.shape]
    ctx.emit(Op.RESHAPE, [src, ctx.int32(list(dst.shape), "shape")], [dst], opts)
