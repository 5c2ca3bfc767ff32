"""ConvTranspose (2-D, group 1) -> TRANSPOSE_CONV in NHWC with OHWI filters, int8 per-channel
on axis 0 (LiteRT's quantization spec for this op) and an int32 bias.

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
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import NHWC
from edgekit.converters.tflite.ops.base import OpSpec, ints, unsupported
from edgekit.converters.tflite.ops.conv import _filter
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
    if int(a.get("group", 1)) != 1:
        raise unsupported(node, "grouped transposed convolutions have no LiteRT kernel")
    if any(d != 1 for d in ints(a.get("dilations"))):
        raise unsupported(node, "dilated transposed convolutions have no LiteRT kernel")
    x = ctx.to_layout(x, NHWC)
    cin, cout, kh, kw = ctx.g.shape(node.input[1])  # ONNX weights: (C_in, C_out, kH, kW)
    strides = ints(a.get("strides"))
    out_shape = ctx.g.shape(node.output[0])
    in_hw, out_hw = x.onnx_shape[2:], out_shape[2:]
    begin = _begin_pads(a, in_hw, out_hw, (kh, kw), strides)
    if any(b < 0 for b in begin):
        raise unsupported(node, f"negative pads {begin} are not written")
    # IOHW -> OHWI; per-channel scales along ONNX axis 1 become TFLite axis 0
    w = ctx.weight(node, 1, 0, lambda t: np.transpose(t, (1, 2, 3, 0)), onnx_axis=1)
    bias = ctx.bias(node, 2, x, w, cout)
    filt = _filter(ctx, node, w, 0)
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
    shape = ctx.int32(np.asarray(target.shape, np.int32), "output_shape")
    ctx.emit(Op.TRANSPOSE_CONV, [shape, filt, x, bias], [target], opts)
    if target is not out:
        n, h, wd, c = out.shape
        ctx.emit(Op.STRIDED_SLICE, [target, ctx.int32([0, begin[0], begin[1], 0], "begin"),
                                    ctx.int32([n, begin[0] + h, begin[1] + wd, c], "end"),
                                    ctx.int32([1, 1, 1, 1], "strides")],
                 [out], S.StridedSliceOptionsT())
    ctx.bind(node, 0, out)


SPECS = {"ConvTranspose": OpSpec(convert_convtranspose, dq_inputs=(0, 1), fusable=True)}
