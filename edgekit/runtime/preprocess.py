"""Image preprocessing from a manifest input's ``preprocess`` spec (Pillow).

The same function feeds calibration on the host and ``predict_image`` on the device,
so the model sees on the board exactly what it was calibrated on.

Spec keys (all recorded in the manifest)::

    size    [height, width]         the model's spatial input size
    resize  "none" | "stretch" | "center-crop"
    color   "gray" | "rgb" | "bgr"   what every image is converted TO (any photo mode is)
    layout  "NCHW" | "NHWC"
    scale   multiply raw 0..255 pixels first (default 1/255)
    mean    per-channel mean subtracted after scaling (list, one value or one per channel)
    std     per-channel std divided after subtracting the mean
"""

from __future__ import annotations

import math
import os
import stat
from typing import Any

import numpy as np

from edgekit.errors import CalibrationError, UserError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
RESIZE_MODES = ("none", "stretch", "center-crop")
COLORS = ("gray", "rgb", "bgr")
LAYOUTS = ("NCHW", "NHWC")
SPEC_KEYS = ("size", "resize", "color", "layout", "scale", "mean", "std")
# Pillow modes that hold plain 8-bit pixels we can convert without guessing.
_CONVERTIBLE = {"L", "LA", "P", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "1"}


def default_spec(shape: tuple[Any, ...], layout: str = "NCHW") -> dict[str, Any]:
    """A spec for a 4-D image input shape: channels 1 -> gray, 3 -> rgb; pixels scaled to [0, 1]."""
    if len(shape) != 4:
        raise UserError(f"image preprocessing needs a 4-D input, the model input is {list(shape)}")
    if layout == "NCHW":
        channels, height, width = shape[1], shape[2], shape[3]
    else:
        height, width, channels = shape[1], shape[2], shape[3]
    if channels not in (1, 3):
        raise UserError(
            f"image preprocessing needs 1 or 3 channels, the model input {list(shape)} "
            f"({layout}) has {channels}"
        )
    return {
        "size": [int(height), int(width)],
        "resize": "none",
        "color": "gray" if channels == 1 else "rgb",
        "layout": layout,
        "scale": 1.0 / 255.0,
        "mean": [0.0],
        "std": [1.0],
    }


def default_spec_mismatch(name: str, spec: dict[str, Any], low: float, high: float,
                          symmetric: bool = False) -> str | None:
    """Why the default ``spec`` (pixels to [0, 1]) cannot feed an input calibrated on values in
    [low, high], or None. ``symmetric``: the grid is [-max|x|, max|x|] (int8, zero point 0), so
    its low end says nothing of the data's. An artifact built from arrays records no preprocessing,
    so ``predict_image`` falls back to the default; arrays normalized otherwise (a mean/std to
    [-1, 1], raw 0..255 pixels) then give the model inputs it was never calibrated on, and
    the drift watch does not see it when they stay inside the range (PP-OCRv4 det built on
    [-1, 1] arrays took [0, 1] images without a word)."""
    scale = float(spec.get("scale", 1.0 / 255.0))
    mean = [float(v) for v in spec.get("mean", [0.0])]
    std = [float(v) for v in spec.get("std", [1.0])]
    reach = [((0.0 - m) / s, (255.0 * scale - m) / s) for m, s in zip(mean, std, strict=False)]
    lowest, highest = min(min(r) for r in reach), max(max(r) for r in reach)
    span = max(highest - lowest, 1e-12)
    margin = 0.05 * span  # the int8 grid around the data reaches past it by a step or so
    if (symmetric or low >= lowest - margin) and high <= highest + margin:
        return None
    return (f"input {name}: this artifact records no image preprocessing (built from arrays), so "
            f"images are scaled to [{lowest:.3g}, {highest:.3g}], but the model was calibrated "
            f"on values in [{low:.3g}, {high:.3g}]: preprocess images as the calibration arrays "
            "were and call predict(), or build from an image folder with --mean/--std (the "
            "manifest then records it)")


def check_channels(spec: dict[str, Any], shape: tuple[Any, ...] | list[Any]) -> None:
    """``color`` must give as many channels as the model input has (gray 1, rgb/bgr 3)."""
    if len(shape) != 4:
        return
    channels = shape[1] if spec.get("layout", "NCHW") == "NCHW" else shape[3]
    gives = 1 if spec.get("color") == "gray" else 3
    if isinstance(channels, int) and channels in (1, 3) and channels != gives:
        raise UserError(
            f"color {spec.get('color')!r} converts images to {gives} channel(s), but the model "
            f"input {list(shape)} takes {channels}; use --color "
            f"{'gray' if channels == 1 else 'rgb or bgr'} (photos of any colour are converted)"
        )


def _number(key: str, value: Any) -> float:
    """A finite int or float (``true`` is not 1, ``"0.5"`` is not 0.5)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(f"preprocess {key} holds {value!r} ({type(value).__name__}); expected a "
                        "finite number")
    return float(value)


def check_values(spec: dict[str, Any]) -> None:
    """The type and range of every key present (a TOML file may hold a few of them)."""
    for key, allowed in (("resize", RESIZE_MODES), ("color", COLORS), ("layout", LAYOUTS)):
        if key in spec and (not isinstance(spec[key], str) or spec[key] not in allowed):
            raise UserError(f"preprocess {key} = {spec[key]!r}; allowed: {', '.join(allowed)}")
    if "size" in spec:
        size = spec["size"]
        if not (isinstance(size, (list, tuple)) and len(size) == 2 and all(
                isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in size)):
            raise UserError(f"preprocess size must be [height, width] (two positive whole "
                            f"numbers), got {size!r}")
    if "scale" in spec and _number("scale", spec["scale"]) == 0:
        raise UserError("preprocess scale = 0; expected a non-zero factor (default 1/255)")
    for key in ("mean", "std"):
        if key in spec:
            values = spec[key] if isinstance(spec[key], (list, tuple)) else [spec[key]]
            if not values:
                raise UserError(f"preprocess {key} = []; expected one value or one per channel")
            for value in values:
                _number(key, value)


def check_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Validate a spec; return it with defaults filled."""
    spec = {"resize": "none", "color": "rgb", "layout": "NCHW", "scale": 1.0 / 255.0,
            "mean": [0.0], "std": [1.0], **spec}
    check_values(spec)
    if "size" not in spec:
        raise UserError("preprocess size must be [height, width], got None")
    channels = 1 if spec["color"] == "gray" else 3
    for key in ("mean", "std"):
        values = spec[key] if isinstance(spec[key], (list, tuple)) else [spec[key]]
        if len(values) not in (1, channels):
            raise UserError(
                f"preprocess {key} has {len(values)} values; expected "
                f"{'1' if channels == 1 else '1 or 3'} for color {spec['color']}"
            )
        spec[key] = [float(v) for v in values]
    if any(s == 0 for s in spec["std"]):
        raise UserError(f"preprocess std = {spec['std']}; expected non-zero values (the "
                        "pixels are divided by them)")
    return spec


# Pixels an image may have: 8x a 12 MP camera frame. PIL's own guard only warns up to 179 MP
# (and its error is untyped); a PNG's header can claim 100000 x 100000 in a few bytes.
MAX_IMAGE_PIXELS = 100_000_000


def open_image(path: str | os.PathLike[str], image_module: Any, unidentified: type) -> Any:
    """A decoded image from a regular file of at most MAX_IMAGE_PIXELS pixels (the header's
    size checked before decoding), else a typed error."""
    name = os.fspath(path)
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):  # a FIFO would block the decoder
            raise CalibrationError(f"{name}: expected an image file, got a folder or a "
                                   "special file (FIFO, device, socket)")
        image = image_module.open(name)
        width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            raise CalibrationError(f"{name}: the image claims {width}x{height} pixels; "
                                   f"expected at most {MAX_IMAGE_PIXELS} (a decompression "
                                   "bomb?)")
        image.load()
    except CalibrationError:
        raise
    except (unidentified, OSError, image_module.DecompressionBombError, ValueError,
            SyntaxError, MemoryError) as exc:
        raise CalibrationError(f"{name}: not a readable image ({type(exc).__name__}: "
                               f"{str(exc)[:200]})") from exc
    return image


def preprocess_image(image: Any, spec: dict[str, Any]) -> np.ndarray:
    """One image (path or PIL image) -> float32 array [1, C, H, W] or [1, H, W, C].

    The spec's ``color`` is what the image is converted TO: an RGB photo for a gray model
    becomes gray (luma), a gray one for an RGB model is repeated over three channels, as the
    device service does with camera frames.
    """
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise UserError("image input needs Pillow: pip install 'edgekit-sdk[image]'") from exc
    spec = check_spec(spec)
    name = image if isinstance(image, (str, os.PathLike)) else getattr(image, "filename", "<image>")
    if isinstance(image, (str, os.PathLike)):
        image = open_image(image, Image, UnidentifiedImageError)
    height, width = (int(s) for s in spec["size"])
    want_gray = spec["color"] == "gray"
    if image.mode not in _CONVERTIBLE:
        raise CalibrationError(
            f"{name}: image mode {image.mode!r} (e.g. 16-bit or float) is not an 8-bit image; "
            f"expected {'L (gray)' if want_gray else 'RGB'}"
        )
    image = image.convert("L" if want_gray else "RGB")
    image = _resize(image, (height, width), spec["resize"], name)
    return normalize(np.asarray(image), spec)


def normalize(pixels: np.ndarray, spec: dict[str, Any]) -> np.ndarray:
    """Raw 0..255 pixels already at the model's size (HxW gray or HxWx3 RGB) -> the model
    input: channel order, scale, mean/std and layout from the spec, float32 [1, ...].

    numpy only, so that camera frames can be fed without Pillow."""
    pixels = np.asarray(pixels, dtype=np.float32)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    elif spec["color"] == "bgr":
        pixels = pixels[:, :, ::-1]
    mean = np.asarray(spec["mean"], dtype=np.float32)
    std = np.asarray(spec["std"], dtype=np.float32)
    pixels = (pixels * np.float32(spec["scale"]) - mean) / std
    if spec["layout"] == "NCHW":
        pixels = pixels.transpose(2, 0, 1)
    return np.ascontiguousarray(pixels[None], dtype=np.float32)


def _resize(image: Any, size: tuple[int, int], mode: str, name: Any) -> Any:
    from PIL import Image

    height, width = size
    if image.size == (width, height):
        return image
    if mode == "none":
        raise CalibrationError(
            f"{name}: image is {image.size[0]}x{image.size[1]} (WxH), the model input is "
            f"{width}x{height}; resize the images or pass --resize stretch|center-crop "
            "(Python: predict_image(..., resize='center-crop'))"
        )
    if mode == "stretch":
        return image.resize((width, height), Image.BILINEAR)
    # center-crop: scale the shorter side to the target (keeping aspect), then crop the middle
    scale = max(width / image.size[0], height / image.size[1])
    new = (max(width, round(image.size[0] * scale)), max(height, round(image.size[1] * scale)))
    image = image.resize(new, Image.BILINEAR)
    left, top = (new[0] - width) // 2, (new[1] - height) // 2
    return image.crop((left, top, left + width, top + height))


def list_images(folder: str) -> list[tuple[str, str | None]]:
    """Image files under ``folder`` as (path, label): one subfolder per class gives labels."""
    found: list[tuple[str, str | None]] = []
    entries = sorted(os.listdir(folder))
    subdirs = [e for e in entries if os.path.isdir(os.path.join(folder, e))]
    for entry in entries:
        path = os.path.join(folder, entry)
        if os.path.isfile(path) and entry.lower().endswith(IMAGE_SUFFIXES):
            found.append((path, None))
    for sub in subdirs:
        for entry in sorted(os.listdir(os.path.join(folder, sub))):
            if entry.lower().endswith(IMAGE_SUFFIXES):
                found.append((os.path.join(folder, sub, entry), sub))
    return found
