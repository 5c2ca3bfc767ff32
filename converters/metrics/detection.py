"""Detection: decode boxes, then match int8 detections to float's (or to labels).

Built-in decode, YOLOv8-style packed output ``[N, 4 + classes, anchors]`` (``[N, anchors,
4 + classes]`` is accepted too: the smaller non-batch axis is taken as the channel axis):
rows 0..3 are box centre x, y, width, height in pixels, the rest class scores. Per anchor
the best class and its score; scores below ``conf`` dropped; class-wise greedy NMS at
``nms_iou``. Other heads plug in through ``--postprocess module:function`` — a callable
taking the list of outputs of a batch and returning one ``Detections`` (or a
``(boxes_xyxy, scores, classes)`` tuple) per image.

Matching: greedy by candidate score, each reference box used once, IoU >= ``iou`` and the
same class. Against float, ``recall`` is the share of float detections int8 kept and
``precision`` the share of int8 detections float also made; ``drop`` = (1 - kept) x 100.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .base import Labels, MetricResult, Outputs, check_pair
from .evidence import PerSample

NAME = "detection"
CONF, NMS_IOU, MATCH_IOU, MAX_DETECTIONS = 0.25, 0.5, 0.5, 300


@dataclass(frozen=True)
class Detections:
    boxes: np.ndarray    # [k, 4] x1, y1, x2, y2
    scores: np.ndarray   # [k]
    classes: np.ndarray  # [k] int


@dataclass(frozen=True)
class DetectionResult:
    matched: int
    reference_count: int  # boxes of the reference (float detections or labels)
    candidate_count: int

    @property
    def recall(self) -> float:
        return self.matched / self.reference_count if self.reference_count else 1.0

    @property
    def precision(self) -> float:
        return self.matched / self.candidate_count if self.candidate_count else 1.0


Postprocess = Callable[[list[np.ndarray]], Sequence[Detections | tuple[np.ndarray, np.ndarray, np.ndarray]]]


def xywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    half = boxes[:, 2:] / 2
    return np.concatenate([boxes[:, :2] - half, boxes[:, :2] + half], axis=1)


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every xyxy box in ``a`` [k, 4] with every one in ``b`` [m, 4] -> [k, m]."""
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    top_left = np.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(bottom_right - top_left, 0, None).prod(-1)
    area_a = np.clip(a[:, 2:] - a[:, :2], 0, None).prod(-1)
    area_b = np.clip(b[:, 2:] - b[:, :2], 0, None).prod(-1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float = NMS_IOU) -> np.ndarray:
    """Indices kept by greedy NMS, best score first."""
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size:
        best, order = int(order[0]), order[1:]
        keep.append(best)
        if order.size:
            order = order[iou_matrix(boxes[best:best + 1], boxes[order])[0] < iou]
    return np.asarray(keep, np.int64)


def decode_packed(packed: np.ndarray, conf: float = CONF, nms_iou: float = NMS_IOU,
                  max_detections: int = MAX_DETECTIONS) -> list[Detections]:
    """YOLO-style ``[N, 4 + classes, anchors]`` -> detections per image (class-wise NMS)."""
    packed = np.asarray(packed, np.float32)
    if packed.ndim != 3 or min(packed.shape[1:]) < 5:
        raise ValueError(f"a packed detection output is [N, 4 + classes, anchors]; got {packed.shape}")
    if packed.shape[1] > packed.shape[2]:
        packed = packed.transpose(0, 2, 1)  # [N, anchors, 4 + classes] as some exporters write it
    found = []
    for image in packed:
        scores_all = image[4:].T                        # [anchors, classes]
        classes = scores_all.argmax(1)
        scores = scores_all[np.arange(len(classes)), classes]
        keep = scores >= conf
        boxes, scores, classes = xywh_to_xyxy(image[:4].T[keep]), scores[keep], classes[keep]
        kept: list[np.ndarray] = []
        for c in np.unique(classes):
            mine = np.nonzero(classes == c)[0]
            kept.append(mine[nms(boxes[mine], scores[mine], nms_iou)])
        idx = np.concatenate(kept) if kept else np.zeros(0, np.int64)
        idx = idx[np.argsort(-scores[idx], kind="stable")][:max_detections]
        found.append(Detections(boxes[idx], scores[idx], classes[idx].astype(np.int64)))
    return found


def match(reference: Detections, candidate: Detections, iou: float = MATCH_IOU) -> int:
    """How many candidate boxes match a distinct reference box of the same class at >= ``iou``."""
    if not len(reference.boxes) or not len(candidate.boxes):
        return 0
    overlap = iou_matrix(candidate.boxes, reference.boxes)
    overlap[candidate.classes[:, None] != reference.classes[None, :]] = 0.0
    used = np.zeros(len(reference.boxes), bool)
    matched = 0
    for i in np.argsort(-candidate.scores, kind="stable"):
        row = np.where(used, 0.0, overlap[i])
        j = int(row.argmax())
        if row[j] >= iou:
            used[j] = True
            matched += 1
    return matched


def match_all(reference: Sequence[Detections], candidate: Sequence[Detections],
              iou: float = MATCH_IOU) -> DetectionResult:
    if len(reference) != len(candidate):
        raise ValueError(f"{len(reference)} reference images but {len(candidate)} candidate images")
    return DetectionResult(sum(match(r, c, iou) for r, c in zip(reference, candidate, strict=True)),
                           sum(len(r.boxes) for r in reference), sum(len(c.boxes) for c in candidate))


def truth(boxes_xywh: Sequence[np.ndarray], classes: Sequence[np.ndarray]) -> list[Detections]:
    """Labels (per image: boxes cx, cy, w, h and class ids) as ``Detections`` of score 1."""
    return [Detections(xywh_to_xyxy(b), np.ones(len(c)), np.asarray(c, np.int64))
            for b, c in zip(boxes_xywh, classes, strict=True)]


def against_labels(packed: np.ndarray, boxes_xywh: Sequence[np.ndarray], classes: Sequence[np.ndarray],
                   conf: float = CONF, iou: float = MATCH_IOU) -> DetectionResult:
    """One model's packed output against labelled boxes: recall and precision."""
    return match_all(truth(boxes_xywh, classes), decode_packed(packed, conf), iou)


def _as_detections(item: Detections | tuple[np.ndarray, np.ndarray, np.ndarray]) -> Detections:
    if isinstance(item, Detections):
        return item
    boxes, scores, classes = item
    return Detections(np.asarray(boxes, np.float64).reshape(-1, 4), np.asarray(scores, np.float64),
                      np.asarray(classes, np.int64))


def decode(outputs: Outputs, postprocess: Postprocess | None, conf: float) -> list[Detections]:
    if postprocess is None:
        return decode_packed(outputs[0], conf)
    return [_as_detections(d) for d in postprocess(list(outputs))]


def detection(reference: Outputs, candidate: Outputs, labels: Labels | None = None, *,
              postprocess: Postprocess | None = None, conf: float = CONF,
              iou: float = MATCH_IOU) -> MetricResult:
    """Int8 detections against float's; with labels ``(boxes_xywh, classes)``, both against them."""
    check_pair(NAME, reference, candidate)
    ref_dets, got_dets = decode(reference, postprocess, conf), decode(candidate, postprocess, conf)
    kept = match_all(ref_dets, got_dets, iou)
    matched = np.array([match(r, c, iou) for r, c in zip(ref_dets, got_dets, strict=True)], np.float64)
    counts = np.array([len(r.boxes) for r in ref_dets], np.float64)
    details = {"kept": kept.recall, "precision_vs_float": kept.precision,
               "float_detections": float(kept.reference_count), "int8_detections": float(kept.candidate_count)}
    if labels is None:
        return MetricResult(NAME, kept.recall, "kept", True, (1 - kept.recall) * 100, details=details,
                            per_sample=PerSample("ratio", counts - matched, counts))
    boxes, classes = labels  # type: ignore[misc]
    truths = truth(boxes, classes)
    on_float, on_int8 = match_all(truths, ref_dets, iou), match_all(truths, got_dets, iou)
    details.update({"recall_float": on_float.recall, "precision_float": on_float.precision,
                    "recall_int8": on_int8.recall, "precision_int8": on_int8.precision})
    found = [np.array([match(t, d, iou) for t, d in zip(truths, dets, strict=True)], np.float64)
             for dets in (ref_dets, got_dets)]
    boxes_per_image = np.array([len(t.boxes) for t in truths], np.float64)
    return MetricResult(NAME, on_int8.recall, "recall", True, (on_float.recall - on_int8.recall) * 100,
                        on_float.recall, details, PerSample("ratio", found[0] - found[1], boxes_per_image))
