"""Pad -> PAD (zero), PADV2 (other constant) or MIRROR_PAD (reflect), in the input's layout."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.schema import Op, S


def convert_pad(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    rank = x.rank
    if len(node.input) > 1 and node.input[1]:
        pads = [int(p) for p in ctx.const(node.input[1]).reshape(-1)]
    else:
        pads = [int(p) for p in a.get("pads", [])]
    if len(node.input) > 3 and node.input[3]:
        raise unsupported(node, "the axes input is not written")
    if any(p < 0 for p in pads):
        raise unsupported(node, "negative pads (cropping) are not written")
    value = 0.0
    if len(node.input) > 2 and node.input[2]:
        value = float(np.asarray(ctx.const(node.input[2])).reshape(-1)[0])
    else:
        value = float(a.get("value", 0.0))
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if x.is_const:
        x = ctx.to_layout(x, x.perm)
    pairs = [[pads[ax], pads[ax + rank]] for ax in x.perm]  # in TFLite axis order
    out = ctx.output(node, 0, x.perm, x.qparams)  # same parameters: PAD copies bytes
    paddings = ctx.int32(pairs, "paddings")
    if mode == "reflect":
        opts = S.MirrorPadOptionsT()
        opts.mode = S.MirrorPadMode.REFLECT
        ctx.emit(Op.MIRROR_PAD, [x, paddings], [out], opts)
    elif mode != "constant":
        raise unsupported(node, f"pad mode {mode!r} (constant and reflect are written)")
    elif value == 0.0:
        ctx.emit(Op.PAD, [x, paddings], [out])
    else:
        qp = x.qparams
        data = qp.quantize(np.asarray([value])) if qp else np.asarray([value], np.float32)
        ctx.emit(Op.PADV2, [x, paddings, ctx.w.const(data, f"{node.name}_value", qp)], [out])
    ctx.bind(node, 0, out)


SPECS = {"Pad": OpSpec(convert_pad)}
