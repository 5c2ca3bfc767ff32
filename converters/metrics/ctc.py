"""CTC: greedy-decode both models' sequences, compare by exact match and character error rate.

The first output is ``[N, T, symbols]`` (logits or probabilities; argmax is the same). Greedy
decode: argmax per step, merge repeats, drop the blank (index ``blank``, 0 by default, as
PyTorch's ``CTCLoss``). CER = total edit distance / total reference length (corpus level,
so short lines do not weigh more than long ones), via rapidfuzz's Levenshtein.
Without labels the float model's decoded text is the reference; ``drop`` = CER x 100.
With labels (one symbol sequence per sample, blank excluded) ``drop`` = (CER int8 - CER
float) x 100 — the points of CER int8 added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .base import Labels, MetricResult, Outputs, check_pair
from .evidence import PerSample

NAME = "ctc"


@dataclass(frozen=True)
class CtcResult:
    exact_match: float  # share of sequences decoded exactly
    cer: float          # edits / reference symbols
    edits: int
    reference_symbols: int


def greedy_decode(logits: np.ndarray, blank: int = 0) -> list[list[int]]:
    """Best path per sample of ``[N, T, symbols]``: argmax, repeats merged, blanks removed."""
    logits = np.asarray(logits)
    if logits.ndim != 3:
        raise ValueError(f"CTC output must be [N, T, symbols]; got {logits.shape}")
    if not 0 <= blank < logits.shape[2]:
        raise ValueError(f"blank index {blank} outside the {logits.shape[2]} symbols of the output")
    best = logits.argmax(-1)
    sequences = []
    for path in best:
        new = np.ones(len(path), bool)
        new[1:] = path[1:] != path[:-1]
        sequences.append([int(s) for s in path[new] if s != blank])
    return sequences


def edit_distance(a: Sequence[int], b: Sequence[int]) -> int:
    from rapidfuzz.distance import Levenshtein

    return int(Levenshtein.distance(list(a), list(b)))


def score(reference: Sequence[Sequence[int]], hypothesis: Sequence[Sequence[int]]) -> CtcResult:
    """Exact-match rate and CER of ``hypothesis`` against ``reference`` sequences."""
    if len(reference) != len(hypothesis):
        raise ValueError(f"{len(reference)} reference sequences but {len(hypothesis)} decoded")
    edits = sum(edit_distance(r, h) for r, h in zip(reference, hypothesis, strict=True))
    symbols = sum(len(r) for r in reference)
    exact = float(np.mean([list(r) == list(h) for r, h in zip(reference, hypothesis, strict=True)])) if reference else 1.0
    cer = edits / symbols if symbols else float(edits > 0)
    return CtcResult(exact, cer, edits, symbols)


def against_labels(logits: np.ndarray, labels: Sequence[Sequence[int]], blank: int = 0) -> CtcResult:
    return score(labels, greedy_decode(logits, blank))


def ctc(reference: Outputs, candidate: Outputs, labels: Labels | None = None, *, blank: int = 0) -> MetricResult:
    check_pair(NAME, reference, candidate)
    ref_text, got_text = greedy_decode(reference[0], blank), greedy_decode(candidate[0], blank)
    versus_float = score(ref_text, got_text)
    details = {"cer_vs_float": versus_float.cer, "exact_vs_float": versus_float.exact_match}
    lengths = np.array([len(r) for r in ref_text], np.float64)
    if labels is None:
        edits = np.array([edit_distance(r, g) for r, g in zip(ref_text, got_text, strict=True)], np.float64)
        return MetricResult(NAME, versus_float.cer, "CER", False, versus_float.cer * 100, details=details,
                            per_sample=PerSample("ratio", edits, lengths))
    truths = [list(t) for t in labels]  # type: ignore[union-attr]
    on_float, on_int8 = score(truths, ref_text), score(truths, got_text)
    details.update({"cer_float": on_float.cer, "cer_int8": on_int8.cer,
                    "exact_float": on_float.exact_match, "exact_int8": on_int8.exact_match})
    added = np.array([edit_distance(t, g) - edit_distance(t, r)
                      for t, r, g in zip(truths, ref_text, got_text, strict=True)], np.float64)
    lengths = np.array([len(t) for t in truths], np.float64)
    return MetricResult(NAME, on_int8.cer, "CER", False, (on_int8.cer - on_float.cer) * 100, on_float.cer, details,
                        PerSample("ratio", added, lengths))
