"""Top-1: the argmax over the last axis of the first output.

With labels: accuracy of each model, ``drop`` = float accuracy - int8 accuracy (points).
Without: the share of samples (and positions, for [N, ..., C] outputs) whose argmax int8
agrees with float, ``drop`` = (1 - agreement) x 100.
"""

from __future__ import annotations

import numpy as np

from .base import Labels, MetricResult, Outputs, check_pair
from .evidence import PerSample

NAME = "top1"


def accuracy(output: np.ndarray, labels: np.ndarray) -> float:
    """Share of argmax over the last axis equal to ``labels`` (shape: output's without its last axis)."""
    predicted = np.asarray(output).argmax(-1)
    truth = np.asarray(labels).reshape(predicted.shape)
    return float((predicted == truth).mean())


def agreement(reference: np.ndarray, candidate: np.ndarray) -> float:
    return float((np.asarray(reference).argmax(-1) == np.asarray(candidate).argmax(-1)).mean())


def top1(reference: Outputs, candidate: Outputs, labels: Labels | None = None) -> MetricResult:
    check_pair(NAME, reference, candidate)
    ref, got = reference[0], candidate[0]
    if ref.ndim < 2 or ref.shape[-1] < 2:
        raise ValueError(f"metric top1 needs class scores [N, ..., classes >= 2]; the first output is {ref.shape}")
    agree = agreement(ref, got)
    # one decision per sample (its positions' share of flips for [N, ..., C] outputs)
    flips = (ref.argmax(-1) != got.argmax(-1)).reshape(len(ref), -1).mean(1)
    if labels is None:
        parts = (PerSample.decisions(flips) if ref.ndim == 2
                 else PerSample("ratio", flips, np.ones(len(ref))))
        return MetricResult(NAME, agree, "agreement", True, (1 - agree) * 100,
                            details={"agreement": agree}, per_sample=parts)
    truth = np.asarray(labels)
    acc_float, acc_int8 = accuracy(ref, truth), accuracy(got, truth)
    right = [(o.argmax(-1) == truth.reshape(o.argmax(-1).shape)).reshape(len(o), -1).mean(1) for o in (ref, got)]
    kind = "paired" if ref.ndim == 2 else "ratio"
    return MetricResult(NAME, acc_int8, "accuracy", True, (acc_float - acc_int8) * 100, acc_float,
                        {"agreement": agree, "accuracy_float": acc_float, "accuracy_int8": acc_int8},
                        per_sample=PerSample(kind, right[0] - right[1], np.ones(len(ref))))
