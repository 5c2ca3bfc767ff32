"""ConvTranspose (2-D) -> TRANSPOSE_CONV in NHWC with OHWI filters, int8 per-channel on axis 0
(LiteRT's quantization spec for this op) and an int32 bias; grouped ones (depthwise
upsampling) -> SPLIT, one TRANSPOSE_CONV per group, CONCATENATION.

LiteRT derives the crop at the start of each spatial axis from its padding flag and the
requested output shape: VALID crops nothing, SAME crops ``total // 2`` with
``total = (ceil(out / s) - 1) * s + k - out``. ONNX crops ``pads[begin]``. When neither flag
crops exactly that, the op is written VALID over ``pads[begin] + out`` rows and columns and a
STRIDED_SLICE drops the first ``pads[begin]`` (same int8 parameters: it only copies bytes).
ONNX's cropping at the end and ``output_padding`` need nothing: LiteRT fills the output
shape it is given, and positions no input reaches hold the bias, as in ONNX.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext, Weight
from edgekit.converters.tflite.layout import NHWC, Value
from edgekit.converters.tflite.ops.base import OpSpec, ints, unsupported
from edgekit.converters.tflite.ops.conv import _filter
from edgekit.converters.tflite.quant import QParams, symmetric_weights
from edgekit.converters.tflite.schema import Op, Padding, S


def _litert_same_crop(out: int, k: int, s: int) -> int:
    """The crop at the start LiteRT's TRANSPOSE_CONV applies with SAME padding."""
    total = (-(-out // s) - 1) * s + k - out
    return max(total, 0) // 2


def _begin_pads(attrs: dict, in_hw, out_hw, kernel, strides) -> list[int]:
    """ONNX's crop at the start of H and W (from pads, or derived for auto_pad and
    output_shape as the ONNX spec does)."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    out_pad = ints(attrs.get("output_padding"), default=0)
    if "pads" in attrs and auto == "NOTSET":
        return [int(p) for p in attrs["pads"][:2]]
    if auto == "VALID" or (auto == "NOTSET" and "output_shape" not in attrs):
        return [0, 0]
    begin = []
    for d in range(2):
        total = strides[d] * (in_hw[d] - 1) + out_pad[d] + kernel[d] - out_hw[d]
        begin.append(total // 2 if auto == "SAME_UPPER" else total - total // 2)
    return begin


def convert_convtranspose(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    if x.rank != 4:
        raise unsupported(node, f"only 2-D transposed convolutions (4-D input) are written, "
                                f"got rank {x.rank}")
    group = int(a.get("group", 1))
    if any(d != 1 for d in ints(a.get("dilations"))):
        raise unsupported(node, "dilated transposed convolutions have no LiteRT kernel")
    x = ctx.to_layout(x, NHWC)
    cin, cout_g, kh, kw = ctx.g.shape(node.input[1])  # ONNX weights: (C_in, C_out/g, kH, kW)
    cout = cout_g * group
    strides = ints(a.get("strides"))
    out_shape = ctx.g.shape(node.output[0])
    in_hw, out_hw = x.onnx_shape[2:], out_shape[2:]
    begin = _begin_pads(a, in_hw, out_hw, (kh, kw), strides)
    if any(b < 0 for b in begin):
        raise unsupported(node, f"negative pads {begin} are not written")
    w = grouped_weight(ctx, node, group)
    bias = ctx.bias(node, 2, x, w, cout)
    out = ctx.output(node, 0, NHWC)
    opts = S.TransposeConvOptionsT()
    opts.strideH, opts.strideW = strides
    opts.fusedActivationFunction = ctx.fused_act
    if begin == [0, 0]:
        opts.padding = Padding.VALID
        target = out
    elif all(_litert_same_crop(out_hw[d], (kh, kw)[d], strides[d]) == begin[d]
             for d in range(2)):
        opts.padding = Padding.SAME
        target = out
    else:
        opts.padding = Padding.VALID
        wide = (out_shape[0], cout, out_hw[0] + begin[0], out_hw[1] + begin[1])
        target = ctx.new_value(wide, NHWC, out.qparams, f"{out.tensor.name}_full")
    if group == 1:
        shape = ctx.int32(np.asarray(target.shape, np.int32), "output_shape")
        ctx.emit(Op.TRANSPOSE_CONV, [shape, _filter(ctx, node, w, 0), x, bias], [target], opts)
    else:
        per_group(ctx, node, x, w, bias, target, group, opts)
    if target is not out:
        n, h, wd, c = out.shape
        ctx.emit(Op.STRIDED_SLICE, [target, ctx.int32([0, begin[0], begin[1], 0], "begin"),
                                    ctx.int32([n, begin[0] + h, begin[1] + wd, c], "end"),
                                    ctx.int32([1, 1, 1, 1], "strides")],
                 [out], S.StridedSliceOptionsT())
    ctx.bind(node, 0, out)


def grouped_weight(ctx: ConversionContext, node: onnx.NodeProto, group: int) -> Weight:
    """The ONNX weight (C_in, C_out/g, kH, kW) as OHWI filters of all groups stacked,
    (C_out, kH, kW, C_in/g), output channel ``g * C_out/g + j`` = group g's channel j.
    Per-channel scales run along ONNX axis 1 (C_out/g of them, shared by the groups); they
    are tiled over the groups so that the int8 weights pass through as given. (onnxruntime
    1.32's quantizer cannot make per-channel grouped ConvTranspose weights: its bias scale
    has C_out/g entries for C_out biases; per-tensor weights work.)"""
    cin, cout_g, kh, kw = ctx.g.shape(node.input[1])

    def to_ohwi(t: np.ndarray) -> np.ndarray:
        t = t.reshape(group, cin // group, cout_g, kh, kw)
        return np.transpose(t, (0, 2, 3, 4, 1)).reshape(group * cout_g, kh, kw, cin // group)

    if group == 1:  # per-channel scales along ONNX axis 1 become TFLite axis 0
        return ctx.weight(node, 1, 0, to_ohwi, onnx_axis=1)
    dq = ctx.g.dq(node.input[1])
    if not ctx.quantized or dq is None or dq.source not in ctx.g.const:
        return ctx.weight(node, 1, 0, to_ohwi, onnx_axis=1)
    if np.size(dq.scale) == 1:  # per-tensor: the one scale on every output channel
        reps = group * cout_g
    else:  # per-channel along ONNX axis 1, C_out/g scales; else requantized below
        reps = group if np.size(dq.scale) == cout_g and dq.axis % 4 == 1 else 1
    scale = np.tile(np.asarray(dq.scale).reshape(-1), reps)
    zp = np.tile(np.asarray(dq.zero_point).reshape(-1), reps)
    q, scale = symmetric_weights(to_ohwi(ctx.g.const[dq.source]), scale, zp, 0)
    return Weight(to_ohwi(ctx.const(node.input[1])).astype(np.float32), q, scale)


def per_group(ctx: ConversionContext, node: onnx.NodeProto, x: Value, w: Weight, bias,
              target: Value, group: int, opts) -> None:
    """LiteRT's TRANSPOSE_CONV has no groups: SPLIT the input channels, one TRANSPOSE_CONV
    per group, CONCATENATION of the outputs (all int8, each at the output's parameters)."""
    n, cin, h, wd = x.onnx_shape
    cout = w.real.shape[0]
    step_in, step_out = cin // group, cout // group
    parts = [ctx.new_value((n, step_in, h, wd), NHWC, x.qparams, f"{node.name}_g{i}")
             for i in range(group)]
    split = S.SplitOptionsT()
    split.numSplits = group
    ctx.emit(Op.SPLIT, [ctx.int32(3, "axis"), x], parts, split)
    bias_data = ctx.w.const_data(bias)
    o_shape = target.onnx_shape
    outs = []
    for i, part in enumerate(parts):
        sl = slice(i * step_out, (i + 1) * step_out)
        wi = Weight(w.real[sl], None if w.q is None else w.q[sl],
                    None if w.scale is None else w.scale[sl])
        qp_b = bias.qparams
        if qp_b is not None:
            qp_b = QParams(qp_b.scale[sl], qp_b.zero_point[sl], 0, "int32")
        bias_i = ctx.w.tensor((step_out,), bias.dtype, qp_b, f"{node.name}_b{i}",
                              bias_data[sl])
        oi = ctx.new_value((o_shape[0], step_out, *o_shape[2:]), NHWC, target.qparams,
                           f"{node.name}_o{i}")
        shape = ctx.int32(np.asarray(oi.shape, np.int32), "output_shape")
        ctx.emit(Op.TRANSPOSE_CONV, [shape, _filter(ctx, node, wi, 0), part, bias_i], [oi],
                 opts)
        outs.append(oi)
    cat = S.ConcatenationOptionsT()
    cat.axis = 3
    ctx.emit(Op.CONCATENATION, outs, [target], cat)


SPECS = {"ConvTranspose": OpSpec(convert_convtranspose, dq_inputs=(0, 1), fusable=True)}
