"""Choose a default task metric from the float model's outputs (and whether labels came).

Looks at the first output only, on real (calibration or validation) data, since shapes
alone cannot tell box coordinates from scores:

1. ``[N, 4 + classes, anchors]`` (or transposed) whose first four rows exceed 1 while every
   other row stays in 0..1 -> ``detection`` (YOLO-style packed boxes and probabilities);
2. ``[N, classes]`` -> ``top1`` (accuracy with labels, agreement with float without);
3. ``[N, T, symbols]`` with T > 1 steps -> ``ctc`` (per-step symbol scores, blank 0);
4. anything else -> ``sqnr`` (no task could be inferred: signal quality only).

The reason is meant for the summary and manifest, so a user sees why and can pass
``--metric`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Outputs


@dataclass(frozen=True)
class DefaultMetric:
    name: str
    reason: str


def looks_packed_detection(output: np.ndarray) -> bool:
    """Boxes in pixels beside probabilities, along the smaller non-batch axis."""
    if output.ndim != 3 or min(output.shape[1:]) < 5:
        return False
    channels = output if output.shape[1] <= output.shape[2] else output.transpose(0, 2, 1)
    boxes, scores = channels[:, :4], channels[:, 4:]
    probabilities = scores.min() >= 0.0 and scores.max() <= 1.0
    return bool(probabilities and np.abs(boxes).max() > 1.0 and channels.shape[2] > channels.shape[1])


def choose_default(outputs: Outputs, has_labels: bool = False) -> DefaultMetric:
    if not outputs:
        raise ValueError("choosing a metric needs at least one output")
    first = np.asarray(outputs[0])
    shape = "x".join(str(d) for d in first.shape[1:])
    if looks_packed_detection(first):
        return DefaultMetric("detection", f"first output [N, {shape}] packs 4 box values above 1 with "
                             "probability rows in 0..1 (YOLO-style): boxes decoded and matched at IoU >= 0.5")
    if first.ndim == 2 and first.shape[1] >= 2:
        against = "labels (accuracy)" if has_labels else "float (top-1 agreement)"
        return DefaultMetric("top1", f"first output [N, {shape}] is class scores: argmax against {against}")
    if first.ndim == 3 and first.shape[1] > 1 and first.shape[2] >= 2:
        return DefaultMetric("ctc", f"first output [N, {shape}] is a sequence of {first.shape[1]} steps of "
                             f"{first.shape[2]} symbol scores: greedy CTC decode (blank 0), character error rate")
    return DefaultMetric("sqnr", f"first output [N, {shape}] matches no task shape: signal-to-noise ratio in dB "
                         "(pass --metric to score a task)")
