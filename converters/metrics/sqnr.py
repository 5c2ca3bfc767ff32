"""Signal-to-quantization-noise ratio in dB: 10 log10(sum(float^2) / sum((float - int8)^2)).

Task-free: it says how much noise int8 added, not whether the task still works (a packed
output can keep 40 dB overall while every class score became 0). Reported for every
output and slice; as the build metric it is the fallback when no task can be inferred.
"""

from __future__ import annotations

from edgekit.numerics.sqnr import CAP_DB, sqnr_db

from .base import Labels, MetricResult, Outputs, check_pair

NAME = "sqnr"
__all__ = ["CAP_DB", "NAME", "sqnr", "sqnr_db"]


def sqnr(reference: Outputs, candidate: Outputs, labels: Labels | None = None) -> MetricResult:
    """The lowest SQNR over the outputs (each output's in ``details``); labels are ignored."""
    check_pair(NAME, reference, candidate)
    per_output = {f"output{i}_db": sqnr_db(r, c) for i, (r, c) in enumerate(zip(reference, candidate, strict=True))}
    return MetricResult(NAME, min(per_output.values()), "dB", True, None, details=per_output)
