"""Signal-to-quantization-noise ratio in dB: 10 log10(sum(float^2) / sum((float - int8)^2)).

Task-free: it says how much noise int8 added, not whether the task still works (a packed
output can keep 40 dB overall while every class score became 0). Reported for every
output and slice; as the build metric it is the fallback when no task can be inferred.
"""

from __future__ import annotations

import numpy as np

from .base import Labels, MetricResult, Outputs, check_pair

NAME = "sqnr"
# identical outputs have infinite SQNR; cap it so manifests stay valid JSON
CAP_DB = 120.0


def sqnr_db(reference: np.ndarray, candidate: np.ndarray) -> float:
    """SQNR of ``candidate`` against ``reference`` in dB, capped at ``CAP_DB``."""
    ref = np.asarray(reference, np.float64)
    noise = float(np.sum((ref - np.asarray(candidate, np.float64)) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0.0:
        return CAP_DB
    if signal == 0.0:
        return -CAP_DB  # an all-zero reference: any error is all noise
    return float(min(CAP_DB, 10.0 * np.log10(signal / noise)))


def sqnr(reference: Outputs, candidate: Outputs, labels: Labels | None = None) -> MetricResult:
    """The lowest SQNR over the outputs (each output's in ``details``); labels are ignored."""
    check_pair(NAME, reference, candidate)
    per_output = {f"output{i}_db": sqnr_db(r, c) for i, (r, c) in enumerate(zip(reference, candidate, strict=True))}
    return MetricResult(NAME, min(per_output.values()), "dB", True, None, details=per_output)
