"""Counting values outside an int8 grid's range: the primitives the drift watch
(``edgekit/numerics/drift.py``) counts with on the device, and the ``calibration`` record the host's
package stage writes with the same code (so the build's baseline and the runtime's share
are counted alike).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# per channel counted at most on one run (a strided sample of whole rows): on a 224x224x3
# image 5 rows of 224 per channel, ~15 us here; shares build up over runs
SAMPLE_VALUES = 1024
CHANNEL_AXES = {"NCHW": 1, "NHWC": 3, "NCW": 1, "NWC": 2}


def grid_range(quantization: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """(low, high, step) of the float values an int8/uint8/int16 grid holds, or None."""
    scale = quantization.get("scale")
    if not isinstance(scale, int | float) or isinstance(scale, bool) or not scale > 0:
        return None
    zero = int(quantization.get("zero_point", 0) or 0)
    dtype = str(quantization.get("dtype") or ("uint8" if zero > 127 else "int8"))
    try:
        info = np.iinfo(np.dtype(dtype))
    except (TypeError, ValueError):
        return None
    return float((info.min - zero) * scale), float((info.max - zero) * scale), float(scale)


def channel_axis(layout: str, shape: Sequence[Any]) -> int | None:
    """The channel axis a layout names, when the shape has it (else None: one channel)."""
    axis = CHANNEL_AXES.get(layout or "")
    return axis if axis is not None and axis < len(shape) else None


def sample_view(array: np.ndarray, axis: int | None, limit: int = SAMPLE_VALUES) -> np.ndarray:
    """A view of ``array`` with at most about ``limit`` values per channel: every k-th index
    of its longest non-channel axis (whole rows: contiguous reads, not a scattered gather)."""
    channels = array.shape[axis] if axis is not None else 1
    per_channel = array.size // max(1, channels)
    if per_channel <= limit or array.ndim == 0:
        return array
    others = [a for a in range(array.ndim) if a != axis]
    longest = max(others, key=lambda a: array.shape[a])
    stride = min(array.shape[longest], math.ceil(per_channel / limit))
    index = [slice(None)] * array.ndim
    index[longest] = slice(None, None, stride)
    return array[tuple(index)]


def outside_counts(array: np.ndarray, low: float, high: float, axis: int | None
                   ) -> tuple[np.ndarray, int]:
    """(values below ``low`` or above ``high`` per channel, values per channel): one mask
    for all channels, then a count per channel plane (cheaper than an axis-tuple count)."""
    mask = np.less(array, low)
    mask |= np.greater(array, high)
    if axis is None:
        return np.array([np.count_nonzero(mask)], dtype=np.float64), array.size
    channels = array.shape[axis]
    index: list[Any] = [slice(None)] * array.ndim
    counts = np.empty(channels, dtype=np.float64)
    for c in range(channels):
        index[axis] = c
        counts[c] = np.count_nonzero(mask[tuple(index)])
    return counts, array.size // max(1, channels)


def at_limits_share(values: np.ndarray, low: float, high: float, step: float) -> float:
    """Share of ``values`` within half a step of the grid's lowest or highest value."""
    flat = np.asarray(values, dtype=np.float32).reshape(-1)
    if not flat.size:
        return 0.0
    half = 0.5 * step
    return (np.count_nonzero(flat <= low + half) + np.count_nonzero(flat >= high - half)
            ) / flat.size


def calibration_record(quantization: Mapping[str, Any] | None, layout: str,
                       shape: Sequence[Any], values: np.ndarray | None,
                       output: bool = False) -> dict[str, Any] | None:
    """The manifest's ``calibration`` entry for one tensor (the host's package stage):
    the range its int8 grid holds, the channel axis (inputs) and the share of ``values``
    (the build's validation data, in the manifest's layout) outside it or at its limits."""
    found = grid_range(quantization or {})
    if found is None:
        return None
    low, high, step = found
    record: dict[str, Any] = {"range": [low, high]}
    if output:
        if values is not None:
            record["baseline"] = [round(at_limits_share(values, low, high, step), 6)]
        return record
    axis = channel_axis(layout, shape)
    record["channel_axis"] = axis
    if values is not None and np.size(values):
        counts, per = outside_counts(np.asarray(values, np.float32), low, high, axis)
        record["baseline"] = [round(float(c) / max(1, per), 6) for c in counts]
        record["samples"] = int(np.shape(values)[0]) if np.ndim(values) else 1
    return record
