"""Real-data tasks for detection and CTC built from scikit-learn's 1,797 handwritten digits.

The digits ship inside the scikit-learn wheel, so these tasks need no download. Images are
split once by index: the first ``TRAIN_DIGITS`` train, the rest only ever appear in held-out
scenes and lines, so held-out figures measure digits the models never saw.

* ``scenes``: 1-4 digits (8x8, upscaled 2x-4x) pasted without overlap on a dark canvas,
  with their boxes (cx, cy, w, h in pixels) and classes — a detection task.
* ``lines``: 3-8 digits side by side with random gaps on a fixed-width strip, with the
  digit string — a CTC recognition task.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TRAIN_DIGITS = 1400
CANVAS = 128  # detector input: 1 x 128 x 128, boxes in pixels 0..128
LINE_HEIGHT, LINE_WIDTH = 16, 160  # recognizer input: 1 x 16 x 160


@dataclass(frozen=True)
class Scenes:
    images: np.ndarray           # [N, 1, CANVAS, CANVAS] float32 in 0..1
    boxes: list[np.ndarray]      # per scene [k, 4] cx, cy, w, h (pixels)
    classes: list[np.ndarray]    # per scene [k] int


@dataclass(frozen=True)
class Lines:
    images: np.ndarray           # [N, 1, LINE_HEIGHT, LINE_WIDTH] float32 in 0..1
    texts: list[list[int]]       # per line: its digits


def digits(split: str) -> tuple[np.ndarray, np.ndarray]:
    """The scikit-learn digits of one split ('train' or 'heldout'), scaled to 0..1."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images, labels = data.images.astype(np.float32) / 16.0, data.target.astype(np.int64)
    if split == "train":
        return images[:TRAIN_DIGITS], labels[:TRAIN_DIGITS]
    if split == "heldout":
        return images[TRAIN_DIGITS:], labels[TRAIN_DIGITS:]
    raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")


def upscale(image: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour upscale, then a 2x2 box blur so edges look like a resampled photo."""
    big = np.kron(image, np.ones((factor, factor), np.float32))
    padded = np.pad(big, ((0, 1), (0, 1)), mode="edge")
    return (padded[:-1, :-1] + padded[1:, :-1] + padded[:-1, 1:] + padded[1:, 1:]) / 4


def scenes(count: int, split: str, seed: int) -> Scenes:
    """``count`` detection scenes from the digits of ``split``."""
    rng = np.random.default_rng(seed)
    pool, labels = digits(split)
    images = np.zeros((count, 1, CANVAS, CANVAS), np.float32)
    all_boxes, all_classes = [], []
    for n in range(count):
        boxes, classes, taken = [], [], []
        for _ in range(int(rng.integers(1, 5))):
            for _attempt in range(20):  # find a free spot; give up on this digit if crowded
                size = 8 * int(rng.integers(2, 5))
                x0, y0 = (int(v) for v in rng.integers(0, CANVAS - size, 2))
                if all(x0 + size <= a or a + s <= x0 or y0 + size <= b or b + s <= y0
                       for a, b, s in taken):
                    break
            else:
                continue
            pick = int(rng.integers(len(pool)))
            patch = upscale(pool[pick], size // 8)
            region = images[n, 0, y0:y0 + size, x0:x0 + size]
            np.maximum(region, patch, out=region)
            taken.append((x0, y0, size))
            # the box is the digit's ink, not its 8x8 cell: tighter boxes, honest IoU
            rows, cols = np.nonzero(patch > 0.1)
            top, bottom = y0 + rows.min(), y0 + rows.max() + 1
            left, right = x0 + cols.min(), x0 + cols.max() + 1
            boxes.append([(left + right) / 2, (top + bottom) / 2, right - left, bottom - top])
            classes.append(int(labels[pick]))
        all_boxes.append(np.asarray(boxes, np.float32).reshape(-1, 4))
        all_classes.append(np.asarray(classes, np.int64))
    images += rng.normal(0, 0.03, images.shape).astype(np.float32)
    return Scenes(np.clip(images, 0, 1), all_boxes, all_classes)


def lines(count: int, split: str, seed: int) -> Lines:
    """``count`` digit strings of 3-8 characters, 2x upscaled, from the digits of ``split``."""
    rng = np.random.default_rng(seed)
    pool, labels = digits(split)
    images = np.zeros((count, 1, LINE_HEIGHT, LINE_WIDTH), np.float32)
    texts = []
    for n in range(count):
        length = int(rng.integers(3, 9))
        x = int(rng.integers(0, 8))
        text = []
        for _ in range(length):
            pick = int(rng.integers(len(pool)))
            if x + 16 > LINE_WIDTH:
                break
            images[n, 0, :, x:x + 16] = np.maximum(images[n, 0, :, x:x + 16], upscale(pool[pick], 2))
            text.append(int(labels[pick]))
            x += 16 + int(rng.integers(-2, 4))  # slight overlap to wide gaps
        texts.append(text)
    images += rng.normal(0, 0.03, images.shape).astype(np.float32)
    return Lines(np.clip(images, 0, 1), texts)
