"""PRelu -> PRELU, or, for per-channel slopes on an int8 image, an exact select.

onnxruntime leaves PRelu unquantized (DQ -> PRelu -> Q): it multiplies by the float slope
and rounds once. LiteRT's int8 PRELU takes one int8 slope tensor at ONE scale, so per-channel
slopes of mixed size and sign (MTCNN's, -0.53..0.43 in one layer) lose up to half a slope
step each; on PNet's real weights that flipped 7% of one layer's outputs by a step, and the
box head amplified the flips to 60% parity with onnxruntime. So per-channel slopes on an
NHWC int8 tensor are written as::

    neg  = DEPTHWISE_CONV_2D 1x1 (slope c as +-127 at scale |slope c|/127: exact per channel)
    pos  = DEPTHWISE_CONV_2D 1x1 (127 at scale 1/127: x at the output's parameters)
    out  = SELECT_V2(x >= 0, pos, neg)

each branch rounded once, as onnxruntime does. ``pos`` is a convolution, not a QUANTIZE,
because XNNPACK's int8 QUANTIZE rescales with an 8-bit fraction (up to a quarter step off at
|x| = 127: it flipped 0.9% of PNet's first PRelu outputs that sat near half a step). One shared slope (after a linear layer) is
exact at its own scale and stays one PRELU; float mode is one float PRELU.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import NHWC, Value
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.quant import QParams
from edgekit.converters.tflite.schema import Op, Padding, S


def convert_prelu(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    if not ctx.is_const(node.input[1]):
        raise unsupported(node, "the slope must be a constant")
    x = ctx.input(node, 0)
    x = ctx.to_layout(x, x.perm) if x.is_const else x
    slopes = _channel_slopes(ctx, node, x)
    if slopes is not None:
        _exact_select(ctx, node, x, slopes)
        return
    slope = ctx.input(node, 1)  # int8 constant (materialized at its own range) or float
    rank = len(ctx.g.shape(node.output[0]))
    if rank > 4:
        raise unsupported(node, f"PRELU broadcasts up to rank 4, got rank {rank}")
    (x, slope), perm = ctx.align([x, slope], rank)
    out = ctx.output(node, 0, perm)
    ctx.emit(Op.PRELU, [x, slope], [out])
    ctx.bind(node, 0, out)


def _channel_slopes(ctx: ConversionContext, node: onnx.NodeProto, x: Value) -> np.ndarray | None:
    """The per-channel slopes of an int8 4-D PRelu ([C,1,1] or [1,C,1,1] in ONNX),
    or None when the slope is shared or the case is not that one."""
    if not ctx.quantized or x.is_const or x.rank != 4 or x.qparams is None or \
            x.qparams.dtype != "int8":
        return None
    slope = np.asarray(ctx.const(node.input[1]), np.float64)
    channels = x.onnx_shape[1]
    if slope.size == 1 or slope.size != channels:
        return None
    if tuple(slope.shape) not in ((channels, 1, 1), (1, channels, 1, 1)):
        return None  # a [C] slope broadcasts over the LAST axis in ONNX, not the channels
    return slope.reshape(-1)


def _exact_select(ctx: ConversionContext, node: onnx.NodeProto, x: Value,
                  slopes: np.ndarray) -> None:
    x = ctx.to_layout(x, NHWC)
    neg = _channel_scale(ctx, node, x, slopes, "neg")
    pos = _channel_scale(ctx, node, x, np.ones_like(slopes), "pos")
    zero = ctx.w.tensor((1,), "int8", x.qparams, f"{node.name}_zero",
                        np.asarray([x.qparams.zp], np.int8))
    mask = ctx.w.tensor(neg.tensor.shape, "bool", None, f"{node.output[0]}_nonneg")
    ctx.emit(Op.GREATER_EQUAL, [x, zero], [mask])
    out = ctx.output(node, 0, NHWC)
    ctx.emit(Op.SELECT_V2, [mask, pos, neg], [out])
    ctx.bind(node, 0, out)


def _channel_scale(ctx: ConversionContext, node: onnx.NodeProto, x: Value, factors: np.ndarray,
                   tag: str) -> Value:
    """``x`` times one factor per channel, at the node's output parameters: a 1x1 depthwise
    convolution whose weight is +-127 at scale |factor|/127 (exact), requantized once."""
    channels = factors.size
    w_scale = np.where(factors != 0, np.abs(factors) / 127.0, 1.0)
    w_int = np.rint(factors / w_scale).astype(np.int8).reshape(1, 1, 1, channels)
    filt = ctx.w.tensor((1, 1, 1, channels), "int8",
                        QParams(tuple(float(s) for s in w_scale), (0,) * channels, 3),
                        f"{node.name}_{tag}_w", w_int)
    b_scale = tuple(float(x.qparams.s * s) for s in w_scale)
    bias = ctx.w.tensor((channels,), "int32", QParams(b_scale, (0,) * channels, 0, "int32"),
                        f"{node.name}_{tag}_b", np.zeros(channels, np.int32))
    out = ctx.new_value(x.onnx_shape, NHWC, ctx.out_params(node), f"{node.output[0]}_{tag}")
    opts = S.DepthwiseConv2DOptionsT()
    opts.padding, opts.strideH, opts.strideW = Padding.VALID, 1, 1
    opts.dilationHFactor, opts.dilationWFactor, opts.depthMultiplier = 1, 1, 1
    ctx.emit(Op.DEPTHWISE_CONV_2D, [x, filt, bias], [out], opts)
    return out


def _slope_is_const(ctx: ConversionContext, node: onnx.NodeProto) -> bool:
    return ctx.is_const(node.input[1])


SPECS = {"PRelu": OpSpec(convert_prelu, can_int8=_slope_is_const)}
