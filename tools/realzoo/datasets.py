"""What each model is fed: calibration and held-out validation arrays (named by model input,
the layout ``edgekit build --calib`` reads) and the ground truth its metric scores against."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CALIB_COUNT = 64


@dataclass
class Sets:
    calib: dict[str, np.ndarray]
    val: dict[str, np.ndarray]
    truth: dict[str, np.ndarray] = field(default_factory=dict)  # per validation sample
    note: str = ""  # where the data came from, for the index and the table


def imagenet_nchw(images: np.ndarray, bgr: bool = False) -> np.ndarray:
    """uint8 [N, H, W, 3] -> float32 [N, 3, H, W]: /255, ImageNet mean/std."""
    x = images.astype(np.float32) / 255.0
    if bgr:
        x = x[..., ::-1]
    x = (x - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225],
                                                                      np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def half_nchw(images: np.ndarray) -> np.ndarray:
    """uint8 [N, H, W, 3] -> float32 [N, 3, H, W] in [-1, 1] (PaddleOCR's (x/255 - 0.5)/0.5)."""
    x = (images.astype(np.float32) / 255.0 - 0.5) / 0.5
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))
