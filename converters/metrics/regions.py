"""Regions: a sparse probability map judged by what its post-processing keeps.

A text detector of the DB family (PP-OCR det, DBNet) outputs a probability map ``[N, 1, H, W]``
whose consumer (PP-OCR's ``DBPostProcess``) thresholds it (``thresh`` 0.3), takes connected
components, drops those whose mean probability is below ``box_thresh`` (0.6) or whose box is
under ``min_size`` (3 px) on a side, and boxes the rest. Those regions are the task's output,
so this metric compares them, float's against int8's:

* per page, the regions of each map (``scipy.ndimage.label`` of ``map > threshold``, filtered
  as above) are matched by pixel IoU >= ``iou`` (0.5). Above 0.5 a match is one-to-one by
  construction (two disjoint regions cannot each hold more than half of a third), so no
  assignment is needed;
* a float region without a match is *lost* (a missed text line, or two lines merged into one
  box); an int8 region without one is *invented* (on a blank page: text that is not there);
* ``drop`` = 100 x (lost + invented) / (float regions + int8 regions), pooled over pages:
  100 x (1 - F1) of the regions, as ``cells`` pools its confident cells and ``detection`` its
  boxes. Its per-sample parts are per page (``ratio``), so the interval resamples pages: the
  regions of one page share its quantization errors (a shifted map moves all its lines), and an
  exact binomial over regions as if independent would be too narrow. When every page agrees the
  bootstrap collapses and the exact binomial on the totals gives the interval; with few regions
  it is wide and the decision says it cannot tell.

The per-pixel gate (``dense.map_iou``: IoU >= 0.9 of the maps thresholded at 0.5 on every
page) judged boundary pixels no consumer reads: PP-OCRv4 det's int8 failed it on 45% of pages
while keeping the text-pixel F1 of the rendered lines (suite: float 71.9%, onnxruntime's int8
72.4%) and, here, 918 of 919 float regions (docs/measurements/det-metric.md).

Maps: ``[N, H, W]``, ``[N, 1, H, W]``, or a few independent channels (``[N, C, H, W]`` or
channels last, C <= ``MAX_CHANNELS``: a region map beside an affinity map, as CRAFT's),
each channel's regions matched with its own.
"""

from __future__ import annotations

import numpy as np

from .base import Labels, MetricResult, Outputs, check_pair
from .evidence import PerSample

NAME = "regions"
THRESHOLD = 0.3   # DBPostProcess thresh: a pixel is text above it
MIN_SCORE = 0.6   # DBPostProcess box_thresh: a region's mean probability
MIN_SIDE = 3      # DBPostProcess min_size: a region's box side in pixels
MATCH_IOU = 0.5
MAX_CHANNELS = 4  # a few maps of one page (text and link scores), not class scores per pixel


def channel_maps(output: np.ndarray) -> np.ndarray:
    """``[N, C, H, W]`` of probabilities from ``[N, H, W]``, ``[N, C, H, W]`` or ``[N, H, W, C]``
    (the channel axis: the one of at most ``MAX_CHANNELS``), or a ValueError naming the shape."""
    output = np.asarray(output)
    if output.ndim == 3:
        return output[:, None]
    if output.ndim == 4 and output.shape[1] <= MAX_CHANNELS:
        return output
    if output.ndim == 4 and output.shape[3] <= MAX_CHANNELS:
        return output.transpose(0, 3, 1, 2)
    raise ValueError(f"metric {NAME} needs probability maps [N, H, W] or [N, C <= {MAX_CHANNELS}, H, W] "
                     f"(channels first or last); got {output.shape}")


def kept_regions(prob: np.ndarray, threshold: float = THRESHOLD, min_score: float = MIN_SCORE,
                 min_side: int = MIN_SIDE) -> np.ndarray:
    """``[H, W]`` integer labels 1..k of the regions the consumer keeps (0: background)."""
    from scipy import ndimage

    labels, count = ndimage.label(prob > threshold)
    if not count:
        return labels
    flat = labels.ravel()
    mean = (np.bincount(flat, prob.ravel(), count + 1) / np.maximum(np.bincount(flat, minlength=count + 1), 1))[1:]
    sides = np.array([min(s[0].stop - s[0].start, s[1].stop - s[1].start) for s in ndimage.find_objects(labels)])
    keep = (mean >= min_score) & (sides >= min_side)
    relabel = np.zeros(count + 1, labels.dtype)
    relabel[1:][keep] = np.arange(1, int(keep.sum()) + 1)
    return relabel[labels]


def matched(reference: np.ndarray, candidate: np.ndarray, iou: float = MATCH_IOU) -> tuple[int, int, int]:
    """(reference regions, candidate regions, pairs at IoU >= ``iou``) of two label images."""
    ref_count, got_count = int(reference.max()), int(candidate.max())
    if not ref_count or not got_count:
        return ref_count, got_count, 0
    pairs = reference.astype(np.int64).ravel() * (got_count + 1) + candidate.ravel()
    overlap = np.bincount(pairs, minlength=(ref_count + 1) * (got_count + 1)).reshape(ref_count + 1, -1)
    inter = overlap[1:, 1:]
    union = overlap[1:].sum(1)[:, None] + overlap[:, 1:].sum(0)[None, :] - inter
    return ref_count, got_count, int((inter >= iou * union).sum())


def page_counts(reference: np.ndarray, candidate: np.ndarray, *, threshold: float = THRESHOLD,
                min_score: float = MIN_SCORE, iou: float = MATCH_IOU) -> np.ndarray:
    """``[N, 3]`` per page: float regions, int8 regions, matched pairs (summed over channels)."""
    ref, got = channel_maps(reference), channel_maps(candidate)
    counts = np.zeros((len(ref), 3), np.int64)
    for page in range(len(ref)):
        for c in range(ref.shape[1]):
            counts[page] += matched(kept_regions(ref[page, c], threshold, min_score),
                                    kept_regions(got[page, c], threshold, min_score), iou)
    return counts


def regions(reference: Outputs, candidate: Outputs, labels: Labels | None = None, *,
            threshold: float = THRESHOLD, min_score: float = MIN_SCORE, iou: float = MATCH_IOU) -> MetricResult:
    check_pair(NAME, reference, candidate)
    counts = page_counts(np.asarray(reference[0]), np.asarray(candidate[0]),
                         threshold=threshold, min_score=min_score, iou=iou).astype(np.float64)
    floats, int8s, pairs = counts.T
    lost, invented = floats - pairs, int8s - pairs
    either = floats + int8s
    loss = float((lost + invented).sum() / either.sum()) if either.sum() else 0.0
    blank = floats == 0
    details = {"f1": 1 - loss, "float_regions": float(floats.sum()), "int8_regions": float(int8s.sum()),
               "region_recall": float(pairs.sum() / floats.sum()) if floats.sum() else 1.0,
               "lost_regions": float(lost.sum()), "invented_regions": float(invented.sum()),
               "pages_changed": float(((lost + invented) > 0).sum()), "blank_pages": float(blank.sum()),
               "blank_pages_with_invented": float((blank & (invented > 0)).sum())}
    return MetricResult(NAME, 1 - loss, f"F1 of regions (map > {threshold:g}) matched at IoU >= {iou:g}", True,
                        100 * loss, details=details, per_sample=PerSample("ratio", lost + invented, either))
