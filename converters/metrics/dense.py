"""Task metrics for dense and continuous outputs: probability / segmentation maps, embeddings,
per-token tags, regression. Each compares int8 with float (labels are not read: these tasks
have no labels in the build's data form) and hands its per-sample parts to ``evidence``.

* ``map_iou``: the first output is a map ``[N, 1, H, W]`` / ``[N, H, W]`` of probabilities
  (thresholded at ``threshold``) or ``[N, C, H, W]`` class scores (argmax per pixel). Per image
  the IoU of the two masks (both empty: 1, so a blank image where int8 invents a region scores
  0); per region (a connected component of float's mask, ``scipy.ndimage.label``) whether int8
  covers half of it; int8 regions float does not half-cover are *invented*. A per-image gate:
  ``drop`` = points of images whose IoU is below ``min_iou`` (0.9), one decision per image. The
  mean hid the worst page (PP-OCRv4 det: mean IoU 0.92 with one page at 0.668); the budget
  (``map_iou = 0`` in the profiles) asks every image to pass. The default for dense masks and
  class maps only: a sparse map of small regions (a DB text detector's) is judged by the regions
  its post-processing keeps (``regions.py``): the pixel gate failed 47 of 120 pages of an int8
  that kept 918 of 919 text lines.
* ``embedding``: rows of the first output are embeddings: cosine per sample, and whether each
  sample's nearest neighbour (cosine, among the others) stays the same. ``drop`` = points of
  nearest neighbours changed.
* ``tags``: ``[N, T, C]`` per-token scores: ``drop`` = points of tokens whose argmax changed.
* ``regression``: ``drop`` = 100 x sum |int8 - float| / sum |float| (relative error, per sample
  as L2 norms).
"""

from __future__ import annotations

import numpy as np

from .base import Labels, MetricResult, Outputs, check_pair
from .evidence import PerSample

THRESHOLD = 0.5
MIN_IOU = 0.9  # an image passes when its thresholded map's IoU with float's is at least this
COVERED = 0.5  # a region is found when the other mask covers this share of it


def masks(output: np.ndarray, threshold: float = THRESHOLD) -> np.ndarray:
    """``[N, H, W]`` boolean (probability map) or integer (class per pixel) masks."""
    output = np.asarray(output)
    if output.ndim == 3:
        return output > threshold
    if output.ndim == 4 and output.shape[1] == 1:
        return output[:, 0] > threshold
    if output.ndim == 4:
        return output.argmax(1)
    raise ValueError(f"metric map_iou needs a map [N, H, W] or [N, C, H, W]; got {output.shape}")


def image_iou(a: np.ndarray, b: np.ndarray) -> float:
    if a.dtype == bool:
        union = np.logical_or(a, b).sum()
        return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)
    classes = np.union1d(np.unique(a), np.unique(b))
    return float(np.mean([image_iou(a == c, b == c) for c in classes]))


def regions(reference: np.ndarray, candidate: np.ndarray) -> tuple[int, int, int]:
    """(float regions, of them int8 covers half, int8 regions float does not half-cover)."""
    from scipy import ndimage

    ref, got = (np.asarray(m) > 0 if m.dtype != bool else m for m in (reference, candidate))
    ref_labels, ref_count = ndimage.label(ref)
    got_labels, got_count = ndimage.label(got)
    found = sum(1 for i in range(1, ref_count + 1) if got[ref_labels == i].mean() >= COVERED)
    invented = sum(1 for i in range(1, got_count + 1) if ref[got_labels == i].mean() < COVERED)
    return ref_count, found, invented


def map_iou(reference: Outputs, candidate: Outputs, labels: Labels | None = None, *,
            threshold: float = THRESHOLD, min_iou: float = MIN_IOU) -> MetricResult:
    check_pair("map_iou", reference, candidate)
    ref, got = masks(reference[0], threshold), masks(candidate[0], threshold)
    ious = np.array([image_iou(r, g) for r, g in zip(ref, got, strict=True)])
    counts = np.array([regions(r, g) for r, g in zip(ref, got, strict=True)], np.float64).reshape(-1, 3)
    blank = counts[:, 0] == 0
    details = {"mean_iou": float(ious.mean()), "min_iou": float(ious.min()), "worst_image": float(ious.argmin()),
               f"images_below_{min_iou:g}": float((ious < min_iou).sum()),
               "region_recall": float(counts[:, 1].sum() / counts[:, 0].sum()) if counts[:, 0].sum() else 1.0,
               "invented_regions": float(counts[:, 2].sum()), "blank_images": float(blank.sum()),
               "blank_images_with_invented": float((blank & (counts[:, 2] > 0)).sum())}
    failed = ious < min_iou
    return MetricResult("map_iou", float(1 - failed.mean()), f"share of images with IoU >= {min_iou:g}", True,
                        100 * float(failed.mean()), details=details, per_sample=PerSample.decisions(failed))


def _unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def nearest(rows: np.ndarray) -> np.ndarray:
    similarity = rows @ rows.T
    np.fill_diagonal(similarity, -np.inf)
    return similarity.argmax(1)


def embedding(reference: Outputs, candidate: Outputs, labels: Labels | None = None) -> MetricResult:
    check_pair("embedding", reference, candidate)
    ref, got = _unit_rows(reference[0]), _unit_rows(candidate[0])
    cosine = (ref * got).sum(1)
    changed = (nearest(ref) != nearest(got)) if len(ref) > 2 else np.zeros(len(ref), bool)
    details = {"mean_cosine": float(cosine.mean()), "min_cosine": float(cosine.min()),
               "nn_agreement": float(1 - changed.mean())}
    return MetricResult("embedding", float(1 - changed.mean()), "nn agreement", True, 100 * float(changed.mean()),
                        details=details, per_sample=PerSample.decisions(changed))


def tags(reference: Outputs, candidate: Outputs, labels: Labels | None = None) -> MetricResult:
    check_pair("tags", reference, candidate)
    ref, got = np.asarray(reference[0]), np.asarray(candidate[0])
    if ref.ndim < 3:
        raise ValueError(f"metric tags needs per-token scores [N, T, classes]; the first output is {ref.shape}")
    ref_best, got_best = ref.argmax(-1).reshape(len(ref), -1), got.argmax(-1).reshape(len(ref), -1)
    changed = ref_best != got_best
    # tokens up to where both sequences end: an attention decoder pads after its end token
    # (SLANet: 94% of 501 steps), and counting the padding would dilute a lost cell 30-fold
    judged = np.maximum(_content(ref_best), _content(got_best))
    judged = np.where(ref_best[:, -1] == got_best[:, -1], judged, changed.shape[1])
    num = np.array([changed[i, :judged[i]].sum() for i in range(len(ref))], np.float64)
    share = float(num.sum() / judged.sum())
    return MetricResult("tags", 1 - share, "tag agreement", True, 100 * share,
                        details={"tag_agreement": 1 - share, "tokens_judged": float(judged.sum())},
                        per_sample=PerSample("ratio", num, judged.astype(np.float64)))


def _content(best: np.ndarray) -> np.ndarray:
    """[N, T] argmax -> per sequence, the steps before its trailing run of one token, plus that
    run's first step (the padding's start is a decision too)."""
    same = best == best[:, -1:]
    run = np.argmax(~same[:, ::-1], 1)  # length of the trailing run (0 when the whole row is one token)
    run = np.where(same.all(1), best.shape[1], run)
    return best.shape[1] - run + 1


def regression(reference: Outputs, candidate: Outputs, labels: Labels | None = None) -> MetricResult:
    check_pair("regression", reference, candidate)
    ref = np.concatenate([np.asarray(r, np.float64).reshape(len(r), -1) for r in reference], 1)
    got = np.concatenate([np.asarray(c, np.float64).reshape(len(c), -1) for c in candidate], 1)
    error, size = np.linalg.norm(got - ref, axis=1), np.linalg.norm(ref, axis=1)
    relative = float(error.sum() / max(size.sum(), 1e-12))
    return MetricResult("regression", relative, "relative error", False, 100 * relative,
                        details={"relative_error": relative, "max_sample_error": float((error / np.maximum(size, 1e-12)).max())},
                        per_sample=PerSample("ratio", error, size))
