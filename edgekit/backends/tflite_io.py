"""The LiteRT backend's input and output paths: the manifest's float view <-> the model's
int8 tensors, without temporaries.

``InputPlan.write`` quantizes a float array straight into the interpreter's own input
buffer: divide into one preallocated float buffer in the caller's layout (contiguous reads),
clip, then round and add the zero point in one float add of a "magic" constant, whose low
byte is the code; the codes are gathered into the model's layout one channel plane at a time
(NCHW -> NHWC); an NHWC array for an NHWC model skips the re-layout. It gives exactly what
``rint(x / scale) + zp`` clipped gives (clipping before rounding is the same because the
bounds are integers; see ``_MAGIC``), so test vectors and validation figures do not move.
Its cost against the invoke: ``tools/benchmarks/bench_fastpath.py`` (docs/measurements/runtime.md).

``InputPlan.write_pixels`` takes a camera frame as it comes (uint8, NHWC, [1, H, W, C] or
[H, W, C]) when the manifest's preprocess spec says how pixels become the model's input:
every channel has 256 possible values, so a 256-entry table per channel holds their int8
codes, computed once with the same float operations as ``preprocess.normalize`` followed by
the quantization above: one gather, no float round trip, the same bytes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.numerics.finite import all_finite, nonfinite_error

if TYPE_CHECKING:
    from edgekit.numerics.drift import InputCounter

NHWC = (0, 2, 3, 1)
MAX_PLANES = 4  # gray, RGB, RGBA: one plane copy each; more channels: one strided copy
# the clip ufunc itself: np.clip's Python wrapper and np.maximum + np.minimum each cost more
# than the arithmetic on an image-size buffer (docs/measurements/runtime.md)
_clip = getattr(getattr(np, "_core", getattr(np, "core", None)), "umath", np).clip
# min and max of the scaled buffer decide whether it needs clipping at all, and find NaN/inf
# on the way (NaN propagates into both): two reads instead of predict's separate NaN dot
# (a read) and the clip (a read and a write): cheaper on an image measured in place after an
# invoke (docs/measurements/runtime.md, "The LiteRT write's check folded into its clip").
_min, _max = np.minimum.reduce, np.maximum.reduce
# Round-and-offset in one add: a float32 in [2**23, 2**24) has a unit step, so
# v + (_MAGIC + zp) rounds v to an integer half-to-even exactly as np.rint does when
# _MAGIC + zp is even (ties go to the even sum), and the float's low byte is then
# (zp + rint(v)) mod 256: the 8-bit code. _MAGIC = 1.5 * 2**23 keeps every clipped v
# (|v| <= 255) inside that range. An odd zero point adds zp - 1, then 1 to the bytes.
_MAGIC = 12582912
_LITTLE = sys.byteorder == "little"  # the low byte comes first (view(uint8)[..., ::4])


@dataclass
class InputPlan:
    """One model input: where it goes, its dtype, shape, layout permutation, int8 params."""

    index: int
    dtype: np.dtype
    shape: tuple[int, ...]
    perm: tuple[int, ...]
    scale: float | None
    zero_point: int
    name: str = ""
    # a NaN or inf in a quantized input raises InputError (the write finds them anyway)
    refuse_nonfinite: bool = False
    # the drift watch's counter (edgekit/numerics/drift.py): the min/max below already tell whether
    # anything clips, so an input in range costs it one add
    watch: InputCounter | None = field(default=None, repr=False)
    _buffer: np.ndarray | None = field(default=None, repr=False)
    _codes: np.ndarray | None = field(default=None, repr=False)  # int8 codes, caller's layout
    _table: np.ndarray | None = field(default=None, repr=False)  # [C, 256] int8 codes
    # [C, 256]: the pixel values the table clips (the drift watch counts frames with it)
    pixel_clips: np.ndarray | None = field(default=None, repr=False)
    # per-call constants as numpy scalars, made once: np.iinfo and np.clip's Python-level
    # checks cost more than the arithmetic on a digits-size input
    _consts: tuple[np.float32, ...] = field(default=(), repr=False)
    _identity: bool = field(default=False, repr=False)
    _magic: np.float32 | None = field(default=None, repr=False)  # None: 16-bit codes
    _odd: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        self._identity = self.perm == tuple(range(len(self.perm)))
        if self.scale is not None:
            info = np.iinfo(self.dtype)
            self._consts = (np.float32(self.scale), np.float32(info.min - self.zero_point),
                            np.float32(info.max - self.zero_point),
                            np.float32(self.zero_point))
            if np.dtype(self.dtype).itemsize == 1 and _LITTLE:
                self._odd = bool(self.zero_point & 1)
                self._magic = np.float32(_MAGIC + self.zero_point - self._odd)

    @property
    def inverse(self) -> tuple[int, ...]:
        return tuple(int(a) for a in np.argsort(self.perm))

    def laid_out(self, array: np.ndarray) -> np.ndarray:
        """The array in the model's layout (a view)."""
        return np.transpose(array, self.perm) if array.ndim == len(self.perm) else array

    def write(self, array: np.ndarray, target: np.ndarray, laid_out: bool = False) -> None:
        """Quantize (or copy) ``array`` (manifest layout) into ``target`` (model layout).

        ``laid_out``: the array is already in the model's layout (NHWC handed to an NHWC
        model) and is written as it is. Otherwise the float work runs on contiguous memory in the caller's layout and
        only the int8 codes are laid out for the model, one channel plane at a time: a
        strided float divide or cast reads 4x the bytes and costs ~3x the whole quantization
        on a 224x224x3 image."""
        if self.scale is None:
            value = array if self._identity or laid_out or array.ndim != len(self.perm) \
                else array.transpose(self.perm)
            np.copyto(target, value, casting="unsafe")
            return
        if self._identity or laid_out or array.ndim != len(self.perm):
            self._quantize_into(array, target)
            return
        value = array.transpose(self.perm)
        if value.flags.c_contiguous:  # one channel: NCHW and NHWC hold the same bytes
            self._quantize_into(value, target)
            return
        if self._magic is not None and self.perm == NHWC and target.shape[-1] <= MAX_PLANES:
            low = self._rounded(array).view(np.uint8)[..., ::4]  # the codes, caller's layout
            raw = target.view(np.uint8)
            for c in range(target.shape[-1]):  # each plane: stride-4 read, stride-C write
                np.copyto(raw[..., c], low[:, c])
            if self._odd:
                np.add(raw, np.uint8(1), out=raw)  # wraps mod 256, as the code's byte does
            return
        codes = self._codes
        if codes is None or codes.shape != array.shape:
            codes = self._codes = np.empty(array.shape, self.dtype)
        self._quantize_into(array, codes)
        if self.perm == NHWC and target.shape[-1] <= MAX_PLANES:
            for c in range(target.shape[-1]):  # each plane: contiguous read, stride-C write
                np.copyto(target[..., c], codes[:, c])
        else:
            np.copyto(target, codes.transpose(self.perm))

    def _scaled(self, array: np.ndarray) -> np.ndarray:
        """The float buffer holding ``clip(array / scale)`` (zero point not yet added);
        ``InputError`` for a NaN or inf when ``refuse_nonfinite``."""
        buf = self._buffer
        if buf is None or buf.shape != array.shape:
            buf = self._buffer = np.empty(array.shape, np.float32)
        scale, lo, hi, _ = self._consts
        np.divide(array, scale, out=buf, casting="unsafe")
        flat = buf.reshape(-1)
        watch = self.watch
        if watch is not None and watch.paused:
            watch = None
        if watch is not None:
            watch.values += flat.size
        if flat.size and not (lo <= _min(flat) and _max(flat) <= hi):  # out of range, NaN, inf
            if self.refuse_nonfinite and not all_finite(array):
                raise nonfinite_error(self.name, array)
            if watch is not None:
                watch.clipped_codes(buf, lo, hi)
            _clip(buf, lo, hi, out=buf)  # clipping first = after: the bounds are integers
        return buf

    def _rounded(self, array: np.ndarray) -> np.ndarray:
        """The float buffer holding ``clip(array / scale) + magic``: each element's low
        byte is its code (see ``_MAGIC``)."""
        buf = self._scaled(array)
        np.add(buf, self._magic, out=buf)
        return buf

    def _quantize_into(self, array: np.ndarray, target: np.ndarray) -> None:
        """``rint(clip(array / scale)) + zp`` into ``target`` of the same shape."""
        if self._magic is not None and array.ndim:  # a 0-d float has no byte view
            raw = target.view(np.uint8)
            np.copyto(raw, self._rounded(array).view(np.uint8)[..., ::4])
            if self._odd:
                np.add(raw, np.uint8(1), out=raw)
            return
        buf = self._scaled(array)
        np.rint(buf, out=buf)
        np.add(buf, self._consts[3], out=buf)
        np.copyto(target, buf, casting="unsafe")

    def quantize(self, array: np.ndarray) -> np.ndarray:
        """``write`` into a new array (the model's layout and dtype)."""
        out = np.empty(self.laid_out(array).shape, self.dtype)
        self.write(array, out)
        return out

    # -- camera frames --------------------------------------------------------------------
    def pixel_table(self, spec: dict[str, Any]) -> np.ndarray | None:
        """[C, 256] codes of every pixel value per channel, or None when this input cannot
        take pixels directly (not an int8 image input in NHWC, or no usable spec)."""
        if self._table is not None:
            return self._table
        if self.scale is None or len(self.shape) != 4 or self.perm != (0, 2, 3, 1) \
                and spec.get("layout") != "NHWC":
            return None
        channels = self.shape[3] if self.perm == (0, 2, 3, 1) else self.shape[-1]
        if spec.get("color") == "bgr" or channels not in (1, 3):
            return None  # a BGR spec reverses channels: leave it to preprocess.normalize
        levels = np.arange(256, dtype=np.float32)[:, None]  # [256, 1] like an [H, W, 1] image
        mean = np.asarray(spec.get("mean", [0.0]), dtype=np.float32)
        std = np.asarray(spec.get("std", [1.0]), dtype=np.float32)
        real = (levels * np.float32(spec.get("scale", 1.0 / 255.0)) - mean) / std
        real = np.broadcast_to(real, (256, channels))
        codes = np.empty((256, channels), self.dtype)
        self.write_flat(real, codes)
        scale, lo, hi, _ = self._consts
        self.pixel_clips = np.ascontiguousarray(((real / scale < lo) | (real / scale > hi)).T)
        self._table = np.ascontiguousarray(codes.T)  # [C, 256]
        return self._table

    def write_flat(self, real: np.ndarray, target: np.ndarray) -> None:
        scale, lo, hi, zp = self._consts
        q = np.rint(np.minimum(np.maximum(real / scale, lo), hi))
        np.copyto(target, q + zp, casting="unsafe")

    def write_pixels(self, frame: np.ndarray, table: np.ndarray, target: np.ndarray) -> None:
        """uint8 [1, H, W, C] / [H, W, C] / [H, W] pixels -> int8 codes in ``target``."""
        pixels = frame.reshape(target.shape)
        if table.shape[0] == 1:
            np.take(table[0], pixels, out=target)
        else:
            for c in range(table.shape[0]):  # one gather per channel plane
                np.take(table[c], pixels[..., c], out=target[..., c])


def dequantize(raw: np.ndarray, scale: float | None, zero_point: int) -> np.ndarray:
    """int8 codes -> float32 (a copy: the interpreter reuses its output buffer)."""
    if scale is None:  # float, or an index (ArgMax's int64): as the model gives it
        return raw.astype(np.float32 if raw.dtype.kind == "f" else raw.dtype, copy=True)
    out = np.subtract(raw, zero_point, dtype=np.float32)  # exact: small integers in float32
    np.multiply(out, np.float32(scale), out=out)
    return out


def dequantize_table(dtype: np.dtype, scale: float | None, zero_point: int
                     ) -> np.ndarray | None:
    """The float value of every 8-bit code, indexed by the code's byte (``raw.view(uint8)``),
    computed with ``dequantize`` itself: one gather per call instead of two ufunc calls with
    a dtype argument (5 us of a 60 us digits model), the same floats."""
    if scale is None or np.dtype(dtype).itemsize != 1:
        return None
    codes = np.arange(256, dtype=np.uint8).view(np.dtype(dtype))
    return dequantize(codes, scale, zero_point)
