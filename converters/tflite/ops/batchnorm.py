"""BatchNormalization left unfused (after a transposed convolution, a ReLU, in 1-D nets)
-> one 1x1 DEPTHWISE_CONV_2D: y = x * k + b per channel with k = gamma / sqrt(var + eps)
and b = beta - mean * k folded at conversion time.

Why a depthwise convolution and not MUL then ADD: its per-channel int8 weights hold each k
exactly (a channel's own scale is |k| / 127) and the int32 bias adds b before the only
rounding, so the int8 result rounds once, as onnxruntime's float BatchNormalization between
DQ and Q does. Tensors of any rank are viewed as [1, 1, M, C] with channels last.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext, _reshape_options
from edgekit.converters.tflite.layout import NHWC, Value
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.quant import QParams, bias_int32, quantize_weights
from edgekit.converters.tflite.schema import Op, S


def _folded(ctx: ConversionContext, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (k, b) in float64."""
    for i in range(1, 5):
        if not ctx.is_const(node.input[i]):
            raise unsupported(node, f"input {i} (scale, bias, mean, var) must be a constant")
    gamma, beta, mean, var = (np.asarray(ctx.const(node.input[i]), np.float64).reshape(-1)
                              for i in range(1, 5))
    eps = float(ctx.attrs(node).get("epsilon", 1e-5))
    k = gamma / np.sqrt(var + eps)
    return k, beta - mean * k


def _reshape(ctx: ConversionContext, x: Value, onnx_shape: tuple[int, ...], perm,
             qp: QParams | None, name: str) -> Value:
    out = ctx.new_value(onnx_shape, perm, qp, name)
    ctx.emit(Op.RESHAPE, [x, ctx.int32(out.shape, "shape")], [out],
             _reshape_options(out.shape))
    return out


def convert_batchnorm(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    if any(node.output[1:]):
        raise unsupported(node, "training-mode outputs (running mean/var) are not written")
    x = ctx.input(node, 0)
    if x.rank < 2:
        raise unsupported(node, f"expected an input of rank >= 2 (N, C, ...), got {x.rank}")
    x = ctx.to_layout(x, x.perm) if x.is_const else x
    k, b = _folded(ctx, node)
    channels = x.onnx_shape[1]
    # channels last; the other axes keep their order (NHWC and [N, C] need no move)
    order = tuple(a for a in x.perm if a != 1) + (1,)
    x = ctx.to_layout(x, order)
    rows = int(np.prod(x.onnx_shape)) // channels
    # [1, 1, rows, C] as an NHWC view of the ONNX shape (1, C, 1, rows)
    view_shape = (1, channels, 1, rows)
    direct = x.rank == 4 and order == NHWC
    src = x if direct else _reshape(ctx, x, view_shape, NHWC, x.qparams,
                                    f"{node.name}_view")
    k4 = k.reshape(1, 1, 1, channels)
    if ctx.quantized:
        q, scale = quantize_weights(k4, 3)
        filt = ctx.w.tensor(q.shape, "int8", QParams(tuple(float(s) for s in scale),
                                                     (0,) * channels, 3), f"{node.name}_k", q)
        bq, bscale = bias_int32(b, None, x.qparams.s, scale, channels)
        bias = ctx.w.tensor((channels,), "int32", QParams(
            tuple(float(s) for s in bscale), (0,) * channels, 0, "int32"), f"{node.name}_b", bq)
    else:
        filt = ctx.w.const(k4.astype(np.float32), f"{node.name}_k")
        bias = ctx.w.const(b.astype(np.float32), f"{node.name}_b")
    out = ctx.output(node, 0, order)
    dst = out if direct else ctx.new_value(view_shape, NHWC, out.qparams, f"{node.name}_dw")
    opts = S.DepthwiseConv2DOptionsT()
    opts.padding, opts.strideH, opts.strideW = S.Padding.VALID, 1, 1
    opts.dilationHFactor = opts.dilationWFactor = 1
    opts.depthMultiplier = 1
    opts.fusedActivationFunction = ctx.fused_act
    ctx.emit(Op.DEPTHWISE_CONV_2D, [src, filt, bias], [dst], opts)
    if not direct:
        ctx.emit(Op.RESHAPE, [dst, ctx.int32(out.shape, "shape")], [out],
                 _reshape_options(out.shape))
    ctx.bind(node, 0, out)


SPECS = {"BatchNormalization": OpSpec(convert_batchnorm, fusable=True)}
