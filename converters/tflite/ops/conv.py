"""Conv -> CONV_2D (OHWI filters, per-channel on axis 0) or DEPTHWISE_CONV_2D (1HWC filters,
per-channel on axis 3); grouped convolutions are split into one CONV_2D per group. 1-D
convolutions are the same kernels with H = 1 (lift1d.py)."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext, Weight
from edgekit.converters.tflite.layout import NHWC, Value
from edgekit.converters.tflite.ops.base import (
    OpSpec,
    ints,
    pad_nhwc,
    spatial_padding,
    unsupported,
)
from edgekit.converters.tflite.ops.lift1d import lift, lifted_attrs, lifted_shape, lower
from edgekit.converters.tflite.quant import QParams
from edgekit.converters.tflite.schema import Op, S


def convert_conv(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    w_shape = tuple(ctx.g.shape(node.input[1]))
    out_shape = tuple(ctx.g.shape(node.output[0]))
    one_d = x.rank == 3  # Conv1d: written as CONV_2D with H = 1 (lift1d.py)
    if one_d:
        x, a = lift(ctx, x), lifted_attrs(node, a)
        w_shape, out_shape = lifted_shape(w_shape), lifted_shape(out_shape)
    elif x.rank != 4:
        raise unsupported(node, f"only 1-D and 2-D convolutions (3-D or 4-D input) are "
                                f"written, got rank {x.rank}")
    x = ctx.to_layout(x, NHWC)
    cout, cin_g, kh, kw = w_shape

    def oihw(order: tuple[int, ...]):  # the ONNX weight as OIHW (1-D: H = 1), transposed
        return lambda t: np.transpose(t.reshape(w_shape), order)

    cin = x.onnx_shape[1]
    group = int(a.get("group", 1))
    strides, dil = ints(a.get("strides")), ints(a.get("dilations"))
    padding, explicit = spatial_padding(node, a, x.onnx_shape[2:], out_shape[2:], (kh, kw),
                                        strides, dil)
    if explicit:
        x = pad_nhwc(ctx, x, explicit)
    out = ctx.output(node, 0, NHWC, onnx_shape=out_shape)
    if group == 1:
        w = ctx.weight(node, 1, 0, oihw((0, 2, 3, 1)))  # OIHW -> OHWI
        _conv2d(ctx, node, x, w, out, padding, strides, dil)
    elif group == cin and cin_g == 1:
        # depthwise: OIHW with I=1 -> 1HWC, channel multiplier = cout / cin
        w = ctx.weight(node, 1, 3, oihw((1, 2, 3, 0)))
        bias = ctx.bias(node, 2, x, w, cout)
        filt = _filter(ctx, node, w, 3)
        opts = S.DepthwiseConv2DOptionsT()
        opts.padding, opts.strideH, opts.strideW = padding, strides[0], strides[1]
        opts.dilationHFactor, opts.dilationWFactor = dil
        opts.depthMultiplier = cout // cin
        opts.fusedActivationFunction = ctx.fused_act
        ctx.emit(Op.DEPTHWISE_CONV_2D, [x, filt, bias], [out], opts)
    else:
        _grouped(ctx, node, x, out, group, padding, strides, dil, oihw((0, 2, 3, 1)))
    ctx.bind(node, 0, lower(ctx, out, ctx.g.shape(node.output[0])) if one_d else out)


def _filter(ctx: ConversionContext, node: onnx.NodeProto, w: Weight, axis: int):
    if w.q is None:
        return ctx.float_weight(w, f"{node.name}_w")
    qp = QParams(tuple(float(s) for s in w.scale), (0,) * len(w.scale), axis)
    return ctx.w.tensor(w.q.shape, "int8", qp, f"{node.name}_w", w.q)


def _conv2d(ctx: ConversionContext, node: onnx.NodeProto, x: Value, w: Weight, out: Value,
            padding: int, strides, dil, bias=None) -> None:
    if bias is None:
        bias = ctx.bias(node, 2, x, w, w.real.shape[0])
    opts = S.Conv2DOptionsT()
    opts.padding, opts.strideH, opts.strideW = padding, strides[0], strides[1]
    opts.dilationHFactor, opts.dilationWFactor = dil
    opts.fusedActivationFunction = ctx.fused_act
    ctx.emit(Op.CONV_2D, [x, _filter(ctx, node, w, 0), bias], [out], opts)


def _grouped(ctx: ConversionContext, node: onnx.NodeProto, x: Value, out: Value, group: int,
             padding: int, strides, dil, to_ohwi) -> None:
    """SPLIT on channels, one CONV_2D per group, CONCATENATION (LiteRT's own CONV_2D
    handles groups only in some kernels, so we do not rely on it)."""
    w = ctx.weight(node, 1, 0, to_ohwi)
    cout = w.real.shape[0]
    full_bias = ctx.bias(node, 2, x, w, cout)
    bias_data = ctx.w.const_data(full_bias)
    n, cin, h, wd = x.onnx_shape
    step_in, step_out = cin // group, cout // group
    parts = [ctx.new_value((n, step_in, h, wd), NHWC, x.qparams, f"{node.name}_g{i}")
             for i in range(group)]
    split_opts = S.SplitOptionsT()
    split_opts.numSplits = group
    ctx.emit(Op.SPLIT, [ctx.int32(3, "axis"), x], parts, split_opts)
    outs = []
    o_shape = out.onnx_shape
    for i, part in enumerate(parts):
        sl = slice(i * step_out, (i + 1) * step_out)
        wi = Weight(w.real[sl], None if w.q is None else w.q[sl],
                    None if w.scale is None else w.scale[sl])
        qp_b = full_bias.qparams
        if qp_b is not None:
            qp_b = QParams(qp_b.scale[sl], qp_b.zero_point[sl], 0, "int32")
        bias = ctx.w.tensor((step_out,), full_bias.dtype, qp_b, f"{node.name}_b{i}",
                            bias_data[sl])
        oi = ctx.new_value((o_shape[0], step_out, o_shape[2], o_shape[3]), NHWC, out.qparams,
                           f"{node.name}_o{i}")
        _conv2d(ctx, node, part, wi, oi, padding, strides, dil, bias)
        outs.append(oi)
    opts = S.ConcatenationOptionsT()
    opts.axis = 3
    ctx.emit(Op.CONCATENATION, outs, [out], opts)


SPECS = {"Conv": OpSpec(convert_conv, dq_inputs=(0, 1), fusable=True)}
