"""Task metrics, scored per validation sample so that every figure carries its N and an interval.

A metric maps the stacked outputs of one model (name -> [N, ...]) to per-sample scores in [0, 1];
it may read the ground truth of the set and the float model's outputs (``reference``), for tasks
whose inputs have no label (agreement with float is then the measure, and the table says so).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Outputs = dict[str, np.ndarray]
Scorer = Callable[[Outputs, Outputs, dict[str, np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class Metric:
    name: str  # what the number means, in the table
    score: Scorer  # (outputs, float outputs, truth) -> per-sample scores
    needs_reference: bool = False
    # further per-sample figures shown beside it in the per-model notes: (what, scorer)
    extras: tuple[tuple[str, Scorer], ...] = ()


@dataclass(frozen=True)
class Estimate:
    mean: float
    low: float
    high: float
    count: int
    method: str  # "exact binomial" (0/1 scores) or "bootstrap"

    def text(self) -> str:
        return f"{100 * self.mean:.1f}% [{100 * self.low:.1f}, {100 * self.high:.1f}] n={self.count}"


def interval(scores: np.ndarray, level: float = 0.95, seed: int = 0) -> Estimate:
    """Clopper-Pearson for 0/1 scores, else a 2000-resample percentile bootstrap of the mean."""
    scores = np.asarray(scores, np.float64)
    n, mean = len(scores), float(scores.mean()) if len(scores) else float("nan")
    alpha = 1.0 - level
    if n and np.isin(scores, (0.0, 1.0)).all():
        from scipy.stats import beta

        k = int(scores.sum())
        low = float(beta.ppf(alpha / 2, k, n - k + 1)) if k else 0.0
        high = float(beta.ppf(1 - alpha / 2, k + 1, n - k)) if k < n else 1.0
        return Estimate(mean, low, high, n, "exact binomial")
    rng = np.random.default_rng(seed)
    means = scores[rng.integers(0, n, (2000, n))].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Estimate(mean, float(low), float(high), n, "bootstrap")


def first(outputs: Outputs, name: str | None) -> np.ndarray:
    return outputs[name] if name else next(iter(outputs.values()))


def label_accuracy(output: str | None, truth_key: str, argmax: bool = True,
                   mapping: dict[int, int] | None = None) -> Scorer:
    """1 where the predicted class (argmax over the last axis, or the label output) is the truth."""
    def score(outputs: Outputs, _: Outputs, truth: dict[str, np.ndarray]) -> np.ndarray:
        value = first(outputs, output)
        predicted = value.reshape(len(value), -1).argmax(axis=1) if argmax else value.reshape(-1)
        wanted = truth[truth_key]
        if mapping:
            wanted = np.array([mapping[int(t)] for t in wanted])
        return (predicted.astype(np.int64) == wanted).astype(np.float64)
    return score


def top1_agreement(output: str | None) -> Scorer:
    """1 where the class agrees with the float model's (inputs without labels)."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        got, ref = first(outputs, output), first(reference, output)
        n = len(got)
        return (got.reshape(n, -1).argmax(1) == ref.reshape(n, -1).argmax(1)).astype(np.float64)
    return score


def _ctc_lines(output: str, characters: list[str]) -> Callable[[Outputs, int], list[str]]:
    """Each line's greedy CTC decoding (the build's own ``greedy_decode``: blank 0, repeats
    merged) as text over PaddleOCR's character list and a space."""
    from edgekit.converters.metrics.ctc import greedy_decode

    table = ["<blank>", *characters, " "]

    def lines(outputs: Outputs, count: int) -> list[str]:
        probs = outputs[output].reshape(count, -1, len(table))
        return ["".join(table[c] for c in path).strip() for path in greedy_decode(probs)]
    return lines


def ctc_exact(output: str, characters: list[str]) -> Scorer:
    """1 where the greedy CTC decoding is the line's text."""
    lines = _ctc_lines(output, characters)

    def score(outputs: Outputs, _: Outputs, truth: dict[str, np.ndarray]) -> np.ndarray:
        got = lines(outputs, len(truth["text"]))
        return np.array([g == str(t) for g, t in zip(got, truth["text"], strict=True)], np.float64)
    return score


def ctc_cer(output: str, characters: list[str]) -> Scorer:
    """Character error rate per line: edit distance of the greedy CTC decoding to the line's
    text over the text's length (0 is perfect; insertions can take it past 1)."""
    from rapidfuzz.distance import Levenshtein

    lines = _ctc_lines(output, characters)

    def score(outputs: Outputs, _: Outputs, truth: dict[str, np.ndarray]) -> np.ndarray:
        got = lines(outputs, len(truth["text"]))
        return np.array([Levenshtein.distance(g, str(t)) / max(len(str(t)), 1)
                         for g, t in zip(got, truth["text"], strict=True)], np.float64)
    return score


def ctc_alnum(output: str, characters: list[str]) -> Scorer:
    """ddddocr: greedy CTC over outputs [T, 1, C] (blank 0), compared with the line's text
    lowercased, letters and digits only (what the captcha model is trained to read)."""
    import re

    def norm(value: str) -> str:
        return re.sub(r"[^0-9a-z]", "", value.lower())

    def score(outputs: Outputs, _: Outputs, truth: dict[str, np.ndarray]) -> np.ndarray:
        out = []
        for row, want in zip(outputs[output], truth["text"], strict=True):
            best = row.reshape(-1, len(characters)).argmax(axis=-1)
            kept = [int(c) for i, c in enumerate(best) if c != 0 and (i == 0 or c != best[i - 1])]
            out.append(norm("".join(characters[c] for c in kept)) == norm(str(want)))
        return np.array(out, np.float64)
    return score


def detections_kept(output: str) -> Scorer:
    """YOLO packed outputs: 1 per float detection that the run keeps (the build's own decode:
    best class over 0.25, class-wise NMS; matched greedily by score, IoU >= 0.5, same class)."""
    from edgekit.converters.metrics.detection import decode_packed, iou_matrix

    def packed(a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)  # per-sample runs stacked: [N, 1, 4 + classes, anchors]
        return a.reshape(-1, *a.shape[-2:]) if a.ndim == 4 else a

    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        kept = []
        for ref, got in zip(decode_packed(packed(reference[output])), decode_packed(packed(outputs[output])),
                            strict=True):
            hit = np.zeros(len(ref.boxes), bool)
            if len(ref.boxes) and len(got.boxes):
                overlap = iou_matrix(got.boxes, ref.boxes)
                overlap[got.classes[:, None] != ref.classes[None, :]] = 0.0
                for i in np.argsort(-got.scores, kind="stable"):
                    row = np.where(hit, 0.0, overlap[i])
                    j = int(row.argmax())
                    hit[j] |= bool(row[j] >= 0.5)
            kept += hit.tolist()
        return np.asarray(kept, np.float64)
    return score


def text_mask_f1(output: str, threshold: float = 0.3) -> Scorer:
    """Pixel F1 of the text map (> threshold, DBNet's binarization) against the rendered line
    boxes; a blank page scores 1 when under 0.1% of it is marked text, else 0."""
    def score(outputs: Outputs, _: Outputs, truth: dict[str, np.ndarray]) -> np.ndarray:
        maps = outputs[output].reshape(truth["mask"].shape) > threshold
        out = []
        for marked, mask in zip(maps, truth["mask"].astype(bool), strict=True):
            if not mask.any():
                out.append(float(marked.mean() < 0.001))
                continue
            hit = np.logical_and(marked, mask).sum()
            out.append(2 * hit / max(1, marked.sum() + mask.sum()))
        return np.array(out)
    return score


def confident_cell_f1(outputs_names: tuple[str, ...], threshold: float,
                      class_slice: slice = slice(None), transpose: bool = False) -> Scorer:
    """Detectors on unlabelled photos: F1 of the (anchor, class) cells scoring over the
    threshold against the float model's, over the images where either marks a cell (a photo
    with nothing to detect says nothing about the detector)."""
    def cells(outputs: Outputs, n: int) -> np.ndarray:
        parts = []
        for name in outputs_names:
            value = outputs[name].reshape(n, *outputs[name].shape[-2:])
            value = value.transpose(0, 2, 1) if transpose else value
            parts.append(value[..., class_slice].reshape(n, -1))
        return np.concatenate(parts, axis=1) > threshold

    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        n = len(reference[outputs_names[0]])
        got, ref = cells(outputs, n), cells(reference, n)
        hit = np.logical_and(got, ref).sum(1)
        total = got.sum(1) + ref.sum(1)
        return (2 * hit / np.maximum(total, 1))[total > 0]
    return score


def threshold_agreement(output: str, threshold: float) -> Scorer:
    """1 where the decision (output > threshold, e.g. speech / not) agrees with float's."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        got, ref = outputs[output].reshape(-1), reference[output].reshape(-1)
        return ((got > threshold) == (ref > threshold)).astype(np.float64)
    return score


def pitch_agreement(output: str, voiced: float = 0.5, bins: int = 2) -> Scorer:
    """CREPE: 1 where both call the frame unvoiced (peak < ``voiced``), or both voiced with
    pitch bins within ``bins`` (20 cents each: 2 bins = 40 cents) of float's."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        got, ref = outputs[output], reference[output]
        got, ref = got.reshape(len(got), -1), ref.reshape(len(ref), -1)
        gv, rv = got.max(1) >= voiced, ref.max(1) >= voiced
        close = np.abs(got.argmax(1) - ref.argmax(1)) <= bins
        return np.where(rv, gv & close, ~gv).astype(np.float64)
    return score
