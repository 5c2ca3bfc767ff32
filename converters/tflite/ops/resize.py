"""Resize (nearest / linear on H and W of a 4-D tensor) -> RESIZE_NEAREST_NEIGHBOR or
RESIZE_BILINEAR in NHWC, mapping ONNX coordinate modes onto LiteRT's two flags."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import NHWC
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.schema import Op, S

# linear: coordinate_transformation_mode -> (align_corners, half_pixel_centers)
_LINEAR = {
    "asymmetric": (False, False),
    "align_corners": (True, False),
    "half_pixel": (False, True),
    "pytorch_half_pixel": (False, True),
}


def _onnx_nearest(n_in: int, n_out: int, coord: str, rounding: str) -> np.ndarray:
    """Source index of each output position, as the ONNX Resize spec computes it."""
    o = np.arange(n_out, dtype=np.float64)
    scale = n_out / n_in
    if coord == "align_corners":
        x = o * (n_in - 1) / (n_out - 1) if n_out > 1 else o * 0
    elif coord == "asymmetric":
        x = o / scale
    elif coord == "tf_half_pixel_for_nn":
        x = (o + 0.5) / scale
    elif coord == "pytorch_half_pixel" and n_out == 1:
        x = o * 0
    else:  # half_pixel, pytorch_half_pixel
        x = (o + 0.5) / scale - 0.5
    x = {"round_prefer_floor": np.ceil(x - 0.5), "round_prefer_ceil": np.floor(x + 0.5),
         "floor": np.floor(x), "ceil": np.ceil(x)}[rounding]
    return np.clip(x, 0, n_in - 1).astype(np.int64)


def _tflite_nearest(n_in: int, n_out: int, align: bool, half: bool) -> np.ndarray:
    """LiteRT's reference GetNearestNeighbor in float32 arithmetic."""
    o = np.arange(n_out, dtype=np.float32)
    scale = np.float32((n_in - 1) / (n_out - 1) if align and n_out > 1 else n_in / n_out)
    v = (o + np.float32(0.5 if half else 0.0)) * scale
    v = np.sign(v) * np.floor(np.abs(v) + 0.5) if align else np.floor(v)
    return np.clip(v, 0, n_in - 1).astype(np.int64)


def _nearest_flags(in_hw, out_hw, coord: str, rounding: str) -> tuple[bool, bool] | None:
    """The (align_corners, half_pixel_centers) under which LiteRT picks exactly the pixels
    ONNX picks, checked index by index for these sizes."""
    for flags in ((False, False), (False, True), (True, False)):
        if all(np.array_equal(_onnx_nearest(i, o, coord, rounding), _tflite_nearest(i, o, *flags))
               for i, o in zip(in_hw, out_hw, strict=True)):
            return flags
    return None


def _text(value, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else value


def convert_resize(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    out_shape = ctx.g.shape(node.output[0])
    if x.rank != 4 or tuple(out_shape[:2]) != tuple(x.onnx_shape[:2]):
        raise unsupported(node, "only resizing H and W of a 4-D NCHW tensor is written")
    mode = _text(a.get("mode"), "nearest")
    coord = _text(a.get("coordinate_transformation_mode"), "half_pixel")
    if node.op_type == "Upsample":
        coord = "asymmetric"
    if mode == "nearest":
        rounding = _text(a.get("nearest_mode"), "round_prefer_floor")
        if node.op_type == "Upsample":
            rounding = "floor"
        flags = _nearest_flags(x.onnx_shape[2:], out_shape[2:], coord, rounding)
        if flags is None:
            raise unsupported(node, f"nearest with {coord!r}/{rounding!r} picks pixels LiteRT "
                                    "cannot reproduce at these sizes")
    elif mode == "linear" and coord in _LINEAR:
        flags = _LINEAR[coord]
    else:
        raise unsupported(node, f"mode {mode!r} with coordinate_transformation_mode {coord!r}")
    align, half = flags
    x = ctx.to_layout(x, NHWC)
    out = ctx.output(node, 0, NHWC, x.qparams)  # same parameters: interpolates raw values
    if mode == "nearest":
        builtin, opts = Op.RESIZE_NEAREST_NEIGHBOR, S.ResizeNearestNeighborOptionsT()
    else:
        builtin, opts = Op.RESIZE_BILINEAR, S.ResizeBilinearOptionsT()
    opts.alignCorners, opts.halfPixelCenters = align, half
    ctx.emit(builtin, [x, ctx.int32(list(out_shape[2:]), "size")], [out], opts)
    ctx.bind(node, 0, out)


SPECS = {"Resize": OpSpec(convert_resize), "Upsample": OpSpec(convert_resize)}
