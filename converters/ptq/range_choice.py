"""Per-tensor range choice (the ``pertensor`` calibration method of the calibrate stage).

minmax, percentile and entropy each pick one rule for every tensor of a model; a tensor with a
rare outlier wants a clipped range, a tensor whose tails carry the signal wants its full range.
Here every activation tensor gets whichever of the three ranges quantizes its own calibration
values with the least mean absolute error (the quantize-dequantize error of that tensor on the
int8 grid the quantizer will use), from a bounded random sample of its values. Absolute, not
squared: under squared error one value clipped by 1000 weighs as much as a million values each
off by 1, so a lone outlier would keep a grid too coarse for everything else (MCT offers MAE
and Lp norms for the same reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

SAMPLE_VALUES = 65536  # values kept per tensor (random, bounded memory)
METHODS = ("minmax", "percentile", "entropy")


def fake_quant(x: np.ndarray, lo: float, hi: float, symmetric: bool) -> np.ndarray:
    """``x`` through the int8 grid onnxruntime derives from the range [lo, hi]: symmetric int8
    (zero point 0) or asymmetric uint8 (the range widened to contain 0)."""
    if symmetric:
        scale = max(abs(lo), abs(hi)) * 2 / 255
        if scale <= 0:
            return np.zeros_like(x)
        return np.clip(np.round(x / scale), -128, 127) * scale
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255
    if scale <= 0:
        return np.zeros_like(x)
    zero = np.round(-lo / scale)
    return (np.clip(np.round(x / scale) + zero, 0, 255) - zero) * scale


def choose(values: np.ndarray, candidates: Mapping[str, tuple[float, float]],
           symmetric: bool) -> tuple[str, dict[str, float]]:
    """The candidate range with the lowest mean absolute quantization error on ``values``, and
    every candidate's error.
    Ties go to the first candidate in order (minmax first: no clipping when it costs nothing)."""
    x = values.astype(np.float64)
    errors = {name: float(np.mean(np.abs(fake_quant(x, lo, hi, symmetric) - x)))
              for name, (lo, hi) in candidates.items()}
    best = min(errors, key=lambda name: (errors[name], list(candidates).index(name)))
    return best, errors


def sample_values(float_path: Any, tensors: list[str], feeds: Iterable[dict[str, np.ndarray]],
                  seed: int = 0) -> dict[str, np.ndarray]:
    """A random sample of at most ``SAMPLE_VALUES`` values of each tensor over the feeds."""
    import onnx
    from edgekit.converters.core.expose import Probe, ort_defaults

    probe = Probe(onnx.load(str(float_path)), tensors, opener=ort_defaults)
    rng = np.random.default_rng(seed)
    kept: dict[str, list[np.ndarray]] = {name: [] for name in tensors}
    for feed in feeds:
        for name, v in probe.run(feed).items():
            flat = np.asarray(v, dtype=np.float32).reshape(-1)
            kept[name].append(flat if flat.size <= SAMPLE_VALUES
                              else rng.choice(flat, SAMPLE_VALUES, replace=False))
    sampled = {}
    for name, parts in kept.items():
        flat = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        sampled[name] = flat if flat.size <= SAMPLE_VALUES else rng.choice(flat, SAMPLE_VALUES, replace=False)
    return sampled


def combine(ranges: Mapping[str, Any], sampled: Mapping[str, np.ndarray],
            symmetric: bool) -> tuple[Any, dict[str, int]]:
    """One ORT ``TensorsData`` taking each tensor's range from the method that fits it best
    (``ranges``: method -> ``TensorsData``), and how many tensors each method won."""
    from onnxruntime.quantization import CalibrationMethod
    from onnxruntime.quantization.calibrate import TensorData, TensorsData

    first = ranges[METHODS[0]]
    chosen: dict[str, Any] = {}
    wins = {m: 0 for m in METHODS}
    for name in first.keys():
        options = {m: tuple(float(np.asarray(v).reshape(-1)[0]) for v in ranges[m][name].range_value)
                   for m in METHODS if name in ranges[m]}
        values = sampled.get(name)
        best = METHODS[0] if values is None or values.size == 0 else choose(values, options, symmetric)[0]
        wins[best] += 1
        lo, hi = ranges[best][name].range_value  # kept as ORT stored them (shape, dtype)
        chosen[name] = TensorData(lowest=lo, highest=hi)
    return TensorsData(CalibrationMethod.MinMax, chosen), wins
