"""Frames to model inputs, exactly as the model was calibrated.

With Pillow installed (``pip install pillow``; on the host the build already has it), every
frame goes through ``edgekit.runtime.preprocess.preprocess_image`` with the manifest's input spec:
the same function that prepared the calibration images and that ``Model.predict_image``
uses. Without Pillow (a minimal ``pip install edgekit-sdk[litert]`` venv), image files are read
with the standard library (PNG, PGM, PPM) and preprocessed with numpy; for frames already
at the model's size the result is bit-identical, for other sizes resizing is a box filter
(close to, not equal to, Pillow's).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import CalibrationError
from edgekit.runtime.preprocess import check_spec, default_spec, normalize, preprocess_image

try:
    from PIL import Image
except ImportError:  # optional: see the module docstring
    Image = None

HAVE_PILLOW = Image is not None
STDLIB_SUFFIXES = (".png", ".pgm", ".ppm", ".pnm")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PNG_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel (3, palette: below)


def input_spec(model: Any, resize: str | None = None) -> dict[str, Any]:
    """The manifest's preprocessing spec for input 0 (or the default for its shape)."""
    spec = model.manifest["inputs"][0].get("preprocess") or default_spec(
        model.inputs[0].shape, model.inputs[0].layout or "NCHW")
    spec = dict(spec)
    if resize:
        spec["resize"] = resize
    return check_spec(spec)


class Preprocessor:
    """Turns file paths and camera arrays into float32 model inputs (batch of one)."""

    def __init__(self, spec: dict[str, Any], camera_resize: str = "center-crop") -> None:
        self.spec = spec
        # a camera never delivers the model's exact size: without an explicit resize mode,
        # keep the aspect ratio and crop the middle
        self.camera_spec = dict(spec, resize=camera_resize) if spec["resize"] == "none" else spec
        self.size = tuple(int(s) for s in spec["size"])  # (height, width)

    def from_path(self, path: str) -> np.ndarray:
        if HAVE_PILLOW:
            return preprocess_image(path, self.spec)
        return array_to_input(read_image(path), self.spec, name=path)

    def from_array(self, pixels: np.ndarray, order: str = "rgb", name: str = "<frame>"
                   ) -> np.ndarray:
        """A camera frame: uint8 HxW (gray) or HxWx3 in ``order`` ("rgb" or "bgr")."""
        if pixels.ndim == 3 and order == "bgr":
            pixels = pixels[:, :, 2::-1]
        elif pixels.ndim == 3 and pixels.shape[2] == 4:
            pixels = pixels[:, :, :3]  # XRGB/XBGR buffers: alpha is padding
        if HAVE_PILLOW:
            image = Image.fromarray(np.ascontiguousarray(pixels))
            image.filename = name
            return preprocess_image(image, self.camera_spec)
        return array_to_input(pixels, self.camera_spec, name=name)


# -- numpy preprocessing (no Pillow) --------------------------------------------------------

def to_gray(pixels: np.ndarray) -> np.ndarray:
    """ITU-R 601-2 luma with Pillow's fixed-point rounding, so both paths agree exactly."""
    if pixels.ndim == 2:
        return pixels
    rgb = pixels[:, :, :3].astype(np.uint32)
    luma = (rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) >> 16
    return luma.astype(np.uint8)


def box_resize(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """Each output pixel is the mean of the input block it covers (area resampling)."""
    h, w = pixels.shape[:2]
    if (h, w) == (height, width):
        return pixels.astype(np.float32)
    rows = np.minimum(np.arange(h) * height // h, height - 1)
    cols = np.minimum(np.arange(w) * width // w, width - 1)
    data = pixels.astype(np.float64).reshape(h, w, -1)
    sums = np.zeros((height, width, data.shape[2]))
    np.add.at(sums, (rows[:, None], cols[None, :]), data)
    counts = np.zeros((height, width))
    np.add.at(counts, (rows[:, None], cols[None, :]), 1.0)
    out = np.rint(sums / counts[:, :, None]).astype(np.float32)
    return out.reshape(height, width, *pixels.shape[2:])


def array_to_input(pixels: np.ndarray, spec: dict[str, Any], name: str = "<frame>"
                   ) -> np.ndarray:
    """What ``preprocess_image`` does, in numpy: colour, resize, scale, mean/std, layout."""
    height, width = (int(s) for s in spec["size"])
    if pixels.ndim == 3 and pixels.shape[2] in (2, 4):
        pixels = pixels[:, :, : pixels.shape[2] - 1]  # drop alpha (Pillow's convert does too)
    if spec["color"] == "gray":
        pixels = to_gray(pixels)
    elif pixels.ndim == 2:
        pixels = np.repeat(pixels[:, :, None], 3, axis=2)
    h, w = pixels.shape[:2]
    if (h, w) != (height, width):
        if spec["resize"] == "none":
            raise CalibrationError(
                f"{name}: image is {w}x{h} (WxH), the model input is {width}x{height}; "
                "resize the images or pass --resize stretch|center-crop")
        if spec["resize"] == "center-crop":
            scale = max(width / w, height / h)
            keep_h, keep_w = min(h, round(height / scale)), min(w, round(width / scale))
            top, left = (h - keep_h) // 2, (w - keep_w) // 2
            pixels = pixels[top:top + keep_h, left:left + keep_w]
    return normalize(box_resize(pixels, height, width), spec)


# -- image files without Pillow -----------------------------------------------------------

def read_image(path: str) -> np.ndarray:
    """uint8 HxW or HxWxC from a PNG (8-bit, not interlaced), PGM or PPM file."""
    data = Path(path).read_bytes()
    try:
        if data.startswith(PNG_MAGIC):
            return decode_png(data)
        if data[:2] in (b"P5", b"P6"):
            return decode_pnm(data)
    except (ValueError, zlib.error, struct.error) as exc:
        raise CalibrationError(f"{path}: not a readable image ({exc})") from exc
    raise CalibrationError(
        f"{path}: without Pillow only PNG, PGM and PPM files can be read (expected one of "
        f"{', '.join(STDLIB_SUFFIXES)}); install Pillow for JPEG and others: pip install pillow")


def decode_png(data: bytes) -> np.ndarray:
    pos, idat, palette = 8, [], None
    width = height = depth = color = interlace = None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            palette = np.frombuffer(body, dtype=np.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if width is None or depth != 8 or interlace != 0 or (color not in PNG_CHANNELS and color != 3):
        raise ValueError(f"PNG with bit depth {depth}, colour type {color}, interlace "
                         f"{interlace}: the stdlib reader handles 8-bit non-interlaced PNGs; "
                         "install Pillow for others")
    channels = 1 if color == 3 else PNG_CHANNELS[color]
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    stride = width * channels
    raw = raw[: height * (stride + 1)].reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    previous = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        out[y] = _unfilter(int(raw[y, 0]), raw[y, 1:], previous, channels)
        previous = out[y]
    pixels = out.reshape(height, width, channels)
    if color == 3:
        if palette is None:
            raise ValueError("palette PNG without a PLTE chunk")
        return palette[pixels[:, :, 0]]
    return pixels[:, :, 0] if channels == 1 else pixels


def _unfilter(kind: int, line: np.ndarray, up: np.ndarray, bpp: int) -> np.ndarray:
    """Undo one scanline's PNG filter (RFC 2083 section 6)."""
    if kind == 0:
        return line.copy()
    if kind == 2:
        return (line.astype(np.uint16) + up).astype(np.uint8)
    if kind == 1:  # Sub: a running sum per channel, modulo 256
        sums = np.cumsum(line.reshape(-1, bpp).astype(np.int64), axis=0)
        return (sums & 0xFF).astype(np.uint8).reshape(-1)
    if kind not in (3, 4):
        raise ValueError(f"unknown PNG filter type {kind}")
    out = bytearray(len(line))
    for i, value in enumerate(line.tolist()):  # Average and Paeth depend on the pixel before
        a = out[i - bpp] if i >= bpp else 0
        b = int(up[i])
        if kind == 3:
            out[i] = (value + ((a + b) >> 1)) & 0xFF
            continue
        c = int(up[i - bpp]) if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        out[i] = (value + pred) & 0xFF
    return np.frombuffer(bytes(out), dtype=np.uint8)


def decode_pnm(data: bytes) -> np.ndarray:
    """Binary PGM (P5) / PPM (P6) with maxval <= 255."""
    fields: list[bytes] = []
    pos = 2
    while len(fields) < 3:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":  # comment to end of line
            pos = data.index(b"\n", pos) + 1
            continue
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    width, height, maxval = (int(f) for f in fields)
    if maxval > 255:
        raise ValueError(f"16-bit PNM (maxval {maxval}); expected 8-bit")
    channels = 1 if data[:2] == b"P5" else 3
    pixels = np.frombuffer(data[pos + 1:pos + 1 + width * height * channels], dtype=np.uint8)
    pixels = pixels.reshape(height, width, channels)
    return pixels[:, :, 0] if channels == 1 else pixels
