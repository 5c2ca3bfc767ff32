"""What an op converter declares, and the padding arithmetic convolutions and pools share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import NHWC, Value
from edgekit.converters.tflite.schema import Op, Padding

from edgekit.errors import UnsupportedModelError

Convert = Callable[[ConversionContext, onnx.NodeProto], None]


@dataclass(frozen=True)
class OpSpec:
    """One ONNX op type's converter.

    ``int8``: the op has an integer LiteRT kernel we write; otherwise it is always written
    as float between DEQUANTIZE/QUANTIZE (and listed as a float op). ``dq_inputs``: inputs
    that must come from a DequantizeLinear for the int8 form (None = all inputs).
    ``fusable``: a following Relu/Clip may become its fused activation. ``can_int8``:
    an extra per-node condition for the int8 form (e.g. a pattern match). ``bool_output``:
    the op yields booleans (a comparison), which no QuantizeLinear follows: its int8 form
    needs int8 inputs only.
    """

    convert: Convert
    int8: bool = True
    dq_inputs: tuple[int, ...] | None = (0,)
    fusable: bool = False
    can_int8: Callable[[ConversionContext, onnx.NodeProto], bool] | None = None
    bool_output: bool = False


def unsupported(node: onnx.NodeProto, why: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"{node.op_type} {node.name!r}: {why} (tflite writer)")


def same_pads(size: int, k: int, stride: int, dilation: int) -> tuple[int, int, int]:
    """TensorFlow SAME padding: (output size, pad before, pad after)."""
    out = -(-size // stride)
    eff = (k - 1) * dilation + 1
    total = max((out - 1) * stride + eff - size, 0)
    return out, total // 2, total - total // 2


def spatial_padding(node: onnx.NodeProto, attrs: dict, in_hw: tuple[int, int],
                    out_hw: tuple[int, int], kernel: tuple[int, int],
                    strides: tuple[int, int], dilations: tuple[int, int]
                    ) -> tuple[int, list[tuple[int, int]] | None]:
    """How to express the ONNX padding: (Padding.SAME or VALID, explicit pads to apply
    with a PAD op first or None). Explicit pads grow at the end so that a VALID window
    yields the ONNX output size (covers ceil_mode)."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for d in range(2):
            _, b, e = same_pads(in_hw[d], kernel[d], strides[d], dilations[d])
            pads += [b, e] if auto == "SAME_UPPER" else [e, b]
        pads = [pads[0], pads[2], pads[1], pads[3]]
    elif auto == "VALID":
        pads = [0, 0, 0, 0]
    begin, end = pads[:2], pads[2:]
    same = [same_pads(in_hw[d], kernel[d], strides[d], dilations[d]) for d in range(2)]
    if all(same[d][0] == out_hw[d] and (begin[d], end[d]) == same[d][1:] for d in range(2)):
        return (Padding.VALID if not any(pads) else Padding.SAME), None
    explicit = []
    for d in range(2):
        eff = (kernel[d] - 1) * dilations[d] + 1
        b, e = begin[d], end[d]
        while (in_hw[d] + b + e - eff) // strides[d] + 1 < out_hw[d]:
            e += 1  # ceil_mode: one more window at the end
        if (in_hw[d] + b + e - eff) // strides[d] + 1 != out_hw[d]:
            raise unsupported(node, f"cannot reproduce output size {out_hw} from input {in_hw}")
        explicit.append((b, e))
    if not any(b or e for b, e in explicit):
        return Padding.VALID, None
    return Padding.VALID, explicit


def pad_nhwc(ctx: ConversionContext, x: Value, pads: list[tuple[int, int]],
             fill: float | None = None) -> Value:
    """PAD (zero in real terms) or PADV2 with ``fill`` on H and W of an NHWC value."""
    n, c, h, w = x.onnx_shape
    shape = (n, c, h + sum(pads[0]), w + sum(pads[1]))
    out = ctx.new_value(shape, NHWC, x.qparams, f"{x.tensor.name}_pad")
    paddings = ctx.int32([[0, 0], list(pads[0]), list(pads[1]), [0, 0]], "paddings")
    if fill is None:
        ctx.emit(Op.PAD, [x, paddings], [out])
    else:
        if x.qparams is not None:
            value = np.asarray([max(-128, min(127, x.qparams.zp + round(fill / x.qparams.s)))
                                if np.isfinite(fill) else -128], np.int8)
            const = ctx.w.const(value, "pad_value", x.qparams)
        else:
            const = ctx.w.const(np.asarray([fill], np.float32), "pad_value")
        ctx.emit(Op.PADV2, [x, paddings, const], [out])
    return out


def ints(values, n: int = 2, default: int = 1) -> tuple[int, ...]:
    values = list(values) if values is not None else [default] * n
    return tuple(int(v) for v in values)
