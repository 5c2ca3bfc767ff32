"""Quantization parameters as TFLite wants them, derived from ONNX QDQ parameters.

onnxruntime may quantize activations to uint8; LiteRT's integer kernels are int8. The same
real value ``scale * (q - zp)`` is kept by shifting both q and zp by -128 with the same scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from edgekit.converters.tflite.schema import S, TType

from edgekit.errors import UnsupportedModelError

INT8_MIN, INT8_MAX = -128, 127
# LiteRT fixed output ranges (kernels check these): softmax and logistic emit [0, 1) as
# scale 1/256, zero point -128; tanh emits [-1, 1) as scale 1/128, zero point 0.
FIXED_SOFTMAX = (1.0 / 256.0, -128)
FIXED_LOGISTIC = (1.0 / 256.0, -128)
FIXED_TANH = (1.0 / 128.0, 0)


@dataclass(frozen=True)
class QParams:
    """Per-tensor (axis None, one value) or per-channel quantization of one tensor."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None
    dtype: str = "int8"  # storage type in the .tflite: int8 or int32 (biases)

    @classmethod
    def per_tensor(cls, scale: float, zero_point: int, dtype: str = "int8") -> QParams:
        return cls((float(np.float32(scale)),), (int(zero_point),), None, dtype)

    @property
    def is_per_channel(self) -> bool:
        return len(self.scale) > 1 or self.axis is not None

    @property
    def s(self) -> float:
        """The single scale of a per-tensor parameter set."""
        return self.scale[0]

    @property
    def zp(self) -> int:
        return self.zero_point[0]

    def same_as(self, other: QParams | None) -> bool:
        if other is None or len(self.scale) != len(other.scale):
            return False
        return bool(
            np.allclose(self.scale, other.scale, rtol=1e-6, atol=0)
            and self.zero_point == other.zero_point
        )

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Float -> int8 (int16 in 16x8 mode) with round-half-to-even, as ONNX QuantizeLinear does."""
        q = np.rint(np.asarray(x, np.float64) / self.s) + self.zp
        if self.dtype == "int16":
            return np.clip(q, -32768, 32767).astype(np.int16)
        return np.clip(q, INT8_MIN, INT8_MAX).astype(np.int8)

    def to_tflite(self) -> S.QuantizationParametersT:
        q = S.QuantizationParametersT()
        # numpy vectors: the flatbuffers object API writes them in one copy (a list goes
        # element by element: 1.4 s of EfficientNet-Lite0's 2.1 s conversion); same bytes
        q.scale = np.asarray(self.scale, np.float32).reshape(-1)
        q.zeroPoint = np.asarray(self.zero_point, np.int64).reshape(-1)
        q.quantizedDimension = int(self.axis or 0)
        return q

    def describe(self) -> dict:
        out = {"scale": self.s, "zero_point": self.zp} if not self.is_per_channel else {
            "scale": list(self.scale), "zero_point": list(self.zero_point), "axis": self.axis}
        out["dtype"] = self.dtype
        return out


def tflite_type(dtype: str | np.dtype) -> int:
    name = np.dtype(dtype).name
    table = {"float32": TType.FLOAT32, "float16": TType.FLOAT16, "int8": TType.INT8, "int32": TType.INT32,
             "int64": TType.INT64, "uint8": TType.UINT8, "bool": TType.BOOL,
             "int16": TType.INT16}
    return table[name]


def activation_params(scale: np.ndarray, zero_point: np.ndarray) -> QParams:
    """An ONNX per-tensor activation (uint8 or int8 zero point) as int8 TFLite parameters."""
    scale = np.asarray(scale, np.float32).reshape(-1)
    zp = np.asarray(zero_point).reshape(-1)
    if zp.dtype == np.int16 and scale.size == 1 and not zp.any():
        return QParams.per_tensor(float(scale[0]), 0, "int16")  # 16x8 mode (tflite/sixteen.py)
    if zp.dtype not in (np.uint8, np.int8):
        raise UnsupportedModelError(
            f"expected 8-bit activations (uint8 or int8 zero points) or symmetric int16 ones, "
            f"got {zp.dtype}")
    shift = -128 if zp.dtype == np.uint8 else 0
    if scale.size != 1:
        # per-channel activations do not exist in LiteRT's int8 kernels
        raise UnsupportedModelError(
            f"expected a per-tensor activation scale, got {scale.size} scales")
    return QParams.per_tensor(float(scale[0]), int(zp[0]) + shift)


def to_int8_values(q: np.ndarray) -> np.ndarray:
    """uint8 tensor data -> int8 with the same real values (zero point shifted by -128)."""
    if q.dtype == np.uint8:
        return (q.astype(np.int16) - 128).astype(np.int8)
    return q.astype(np.int8)


def symmetric_weights(
    q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, axis: int
) -> tuple[np.ndarray, np.ndarray]:
    """Int8 weights with zero point 0 per channel along ``axis`` (what LiteRT requires).

    onnxruntime's per-channel int8 weights already are symmetric and pass through unchanged;
    anything else (uint8, per-tensor, non-zero zero points) is dequantized and requantized.
    Returns (int8 weights, float32 per-channel scales).
    """
    scale = np.asarray(scale, np.float32).reshape(-1)
    zp = np.asarray(zero_point).reshape(-1)
    channels = q.shape[axis]
    if q.dtype == np.int8 and not zp.any() and scale.size == channels:
        return q, scale
    real = dequantize(q, scale, zp, axis)
    return quantize_weights(real, axis)


def quantize_weights(real: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Float weights -> symmetric per-channel int8 along ``axis`` (range [-127, 127])."""
    moved = np.moveaxis(real.astype(np.float64), axis, 0).reshape(real.shape[axis], -1)
    peak = np.abs(moved).max(axis=1) if moved.size else np.zeros(real.shape[axis])
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    shape = [1] * real.ndim
    shape[axis] = -1
    q = np.clip(np.rint(real / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def dequantize(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, axis: int | None) -> (
        np.ndarray):
    """ONNX DequantizeLinear in numpy (per-tensor, or per-channel along ``axis``)."""
    scale = np.asarray(scale, np.float32).reshape(-1)
    zp = np.asarray(zero_point).reshape(-1).astype(np.int64)
    if scale.size > 1 and q.ndim > 0:
        shape = [1] * q.ndim
        shape[axis if axis is not None else 1] = -1
        scale = scale.reshape(shape)
        zp = zp.reshape(shape)
    return ((q.astype(np.int64) - zp) * scale).astype(np.float32)


def bias_int32(
    bias: np.ndarray | None,
    bias_scale: np.ndarray | None,
    input_scale: float,
    weight_scale: np.ndarray,
    channels: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Int32 bias with scale = input scale x weight scale per channel, as LiteRT checks.

    ``bias`` is either int32 with its own ``bias_scale`` (onnxruntime's quantized bias) or
    float (``bias_scale`` None). Returns (int32 values, float32 scales).
    """
    # LiteRT recomputes input_scale * filter_scale in float32 and compares with the bias
    # scale to 1e-6 relative: compute it exactly the same way
    want = (np.float32(input_scale) * np.asarray(weight_scale, np.float32)).astype(np.float32)
    want = np.broadcast_to(want, (channels,)).astype(np.float32)
    if bias is None:
        return np.zeros(channels, np.int32), want
    if bias_scale is None:
        real = np.asarray(bias, np.float64).reshape(-1)
    else:
        given = np.broadcast_to(np.asarray(bias_scale, np.float32).reshape(-1), (channels,))
        if bias.dtype == np.int32 and np.allclose(given, want, rtol=1e-6, atol=0):
            return bias.reshape(-1).astype(np.int32), want
        real = bias.reshape(-1).astype(np.float64) * given
    q = np.rint(real / want.astype(np.float64))
    return np.clip(q, -(2**31) + 1, 2**31 - 1).astype(np.int32), want
