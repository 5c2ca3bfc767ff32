"""Signal-to-quantization-noise ratio in dB: 10 log10(sum(ref^2) / sum((ref - got)^2)).

One definition for both sides: the device's ``verify`` judges slices with it and the host's
metrics report it, so a figure in a build summary and one printed on the board mean the same.
"""

from __future__ import annotations

import numpy as np

# identical outputs have infinite SQNR; cap it so manifests stay valid JSON
CAP_DB = 120.0


def sqnr_db(reference: np.ndarray, candidate: np.ndarray) -> float:
    """SQNR of ``candidate`` against ``reference`` in dB, within +-``CAP_DB``."""
    ref = np.asarray(reference, np.float64)
    noise = float(np.sum((ref - np.asarray(candidate, np.float64)) ** 2))
    return sqnr_from_sums(float(np.sum(ref ** 2)), noise)


def sqnr_from_sums(signal: float, noise: float) -> float:
    """The same figure from sums already taken (sum(ref^2), sum((ref - got)^2)), for callers
    that accumulate them over chunks of data."""
    if noise == 0.0:
        return CAP_DB
    if signal == 0.0:
        return -CAP_DB  # an all-zero reference: any error is all noise
    return float(min(CAP_DB, 10.0 * np.log10(signal / noise)))
