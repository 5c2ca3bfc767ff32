"""Top-1: the argmax over the last axis of the first output, or the first output itself when it
is integer class labels ``[N]`` (scikit-learn through skl2onnx outputs ``label`` first).

With labels: accuracy of each model, ``drop`` = float accuracy - int8 accuracy (points).
Without: the share of samples (and positions, for [N, ..., C] outputs) whose argmax int8
agrees with float, ``drop`` = (1 - agreement) x 100.
"""

from __future__ import annotations

import numpy as np

from .base import Labels, MetricResult, Outputs, check_pair
from .evidence import PerSample

NAME = "top1"


def is_labels(output: np.ndarray) -> bool:
    """One class id per sample: ``[N]``, or ``[N, 1]`` of integers (an int8 graph may return
    its labels as floats; a lone [N] column has no class axis to take an argmax over)."""
    output = np.asarray(output)
    return bool(output.ndim >= 1 and output.size == len(output)
                and (output.ndim == 1 or np.issubdtype(output.dtype, np.integer)))


def predicted(output: np.ndarray) -> np.ndarray:
    """Class per sample (and position): the labels themselves, or the argmax of the scores."""
    output = np.asarray(output)
    return output.reshape(len(output)) if is_labels(output) else output.argmax(-1)


def accuracy(output: np.ndarray, labels: np.ndarray) -> float:
    """Share of predictions equal to ``labels`` (shape: output's without its last axis)."""
    predicted_ = predicted(output)
    truth = np.asarray(labels).reshape(predicted_.shape)
    return float((predicted_ == truth).mean())


def agreement(reference: np.ndarray, candidate: np.ndarray) -> float:
    return float((predicted(reference) == predicted(candidate)).mean())


def top1(reference: Outputs, candidate: Outputs, labels: Labels | None = None) -> MetricResult:
    check_pair(NAME, reference, candidate)
    ref, got = reference[0], candidate[0]
    if not is_labels(ref) and (ref.ndim < 2 or ref.shape[-1] < 2):
        raise ValueError(f"metric top1 needs class scores [N, ..., classes >= 2]; the first output is {ref.shape}")
    agree = agreement(ref, got)
    # one decision per sample (its positions' share of flips for [N, ..., C] outputs)
    one_per_sample = ref.ndim == 2 or is_labels(ref)
    flips = (predicted(ref) != predicted(got)).reshape(len(ref), -1).mean(1)
    if labels is None:
        parts = (PerSample.decisions(flips) if one_per_sample
                 else PerSample("ratio", flips, np.ones(len(ref))))
        return MetricResult(NAME, agree, "agreement", True, (1 - agree) * 100,
                            details={"agreement": agree}, per_sample=parts)
    truth = np.asarray(labels)
    acc_float, acc_int8 = accuracy(ref, truth), accuracy(got, truth)
    right = [(predicted(o) == truth.reshape(predicted(o).shape)).reshape(len(o), -1).mean(1) for o in (ref, got)]
    kind = "paired" if one_per_sample else "ratio"
    return MetricResult(NAME, acc_int8, "accuracy", True, (acc_float - acc_int8) * 100, acc_float,
                        {"agreement": agree, "accuracy_float": acc_float, "accuracy_int8": acc_int8},
                        per_sample=PerSample(kind, right[0] - right[1], np.ones(len(ref))))
