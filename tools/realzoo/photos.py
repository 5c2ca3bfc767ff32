"""Real photographs that ship in wheels: scikit-image's ``skimage/data`` files (the local ones;
the pooch downloads cannot be reached), matplotlib's Grace Hopper portrait, the LFW subset.

The photos are split by photo, not by crop, so that calibration and validation never see the
same picture: CALIB_PHOTOS feed calibration, VAL_PHOTOS the held-out set.
"""

from __future__ import annotations

import io
from functools import cache

import numpy as np
from PIL import Image

from . import pins
from .wheels import member

CALIB_PHOTOS = ("astronaut.png", "coffee.png", "rocket.jpg", "ihc.png", "camera.png",
                "brick.png", "coins.png", "cell.png", "color.png", "logo.png", "moon.png")
VAL_PHOTOS = ("chelsea.png", "motorcycle_left.png", "motorcycle_right.png", "retina.jpg",
              "hubble_deep_field.jpg", "grass.png", "gravel.png", "clock_motion.png",
              "phantom.png", "horse.png", "text.png", "page.png", "grace_hopper.jpg")
PEOPLE_CALIB = ("astronaut.png", "camera.png", "coffee.png", "rocket.jpg")
PEOPLE_VAL = ("grace_hopper.jpg", "chelsea.png", "motorcycle_left.png", "text.png")


@cache
def photo(name: str) -> np.ndarray:
    """One photo as RGB uint8 [H, W, 3] (grey and RGBA photos converted; alpha on white)."""
    if name == "grace_hopper.jpg":
        data = member(pins.MATPLOTLIB, "matplotlib/mpl-data/sample_data/grace_hopper.jpg")
    else:
        data = member(pins.SCIKIT_IMAGE, f"skimage/data/{name}")
    image = Image.open(io.BytesIO(data))
    if image.mode in ("RGBA", "LA", "P"):
        image = image.convert("RGBA")
        white = Image.new("RGBA", image.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, image)
    return np.asarray(image.convert("RGB"))


def crops(names: tuple[str, ...], count: int, size: int, seed: int) -> np.ndarray:
    """``count`` square crops (a random side of 40-100% of the short side, random place and
    mirror) resized to ``size``, cycling over the photos: uint8 [count, size, size, 3]."""
    rng = np.random.default_rng(seed)
    out = np.empty((count, size, size, 3), np.uint8)
    for i in range(count):
        image = photo(names[i % len(names)])
        h, w = image.shape[:2]
        side = int(min(h, w) * rng.uniform(0.4, 1.0))
        top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        crop = Image.fromarray(image[top:top + side, left:left + side])
        if rng.random() < 0.5:
            crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        out[i] = np.asarray(crop.resize((size, size), Image.Resampling.BILINEAR))
    return out


def letterboxed(names: tuple[str, ...], count: int, size: int, seed: int) -> np.ndarray:
    """Whole photos or large crops (60-100%) letterboxed into ``size`` x ``size`` with grey
    114 borders, as YOLO-style detectors are fed: uint8 [count, size, size, 3]."""
    rng = np.random.default_rng(seed)
    out = np.full((count, size, size, 3), 114, np.uint8)
    for i in range(count):
        image = photo(names[i % len(names)])
        h, w = image.shape[:2]
        ch, cw = int(h * rng.uniform(0.6, 1.0)), int(w * rng.uniform(0.6, 1.0))
        top, left = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
        crop = Image.fromarray(image[top:top + ch, left:left + cw])
        scale = size / max(ch, cw)
        nw, nh = max(1, round(cw * scale)), max(1, round(ch * scale))
        resized = np.asarray(crop.resize((nw, nh), Image.Resampling.BILINEAR))
        y, x = (size - nh) // 2, (size - nw) // 2
        out[i, y:y + nh, x:x + nw] = resized
    return out


@cache
def lfw_subset() -> tuple[np.ndarray, np.ndarray]:
    """scikit-image's LFW subset: 200 grey 25x25 crops in [0, 1], the first 100 faces and the
    last 100 not faces; returns (images [200, 25, 25] float64, labels 1 = face)."""
    images = np.load(io.BytesIO(member(pins.SCIKIT_IMAGE, "skimage/data/lfw_subset.npy")))
    labels = np.r_[np.ones(100, np.int64), np.zeros(100, np.int64)]
    return images, labels


def lfw_split() -> tuple[np.ndarray, np.ndarray]:
    """Disjoint indices into the LFW subset: 64 for calibration (32 faces, 32 not), the other
    136 held out. Interleaved so that both halves hold both kinds."""
    rng = np.random.default_rng(30)
    faces, others = rng.permutation(100), 100 + rng.permutation(100)
    calib = np.r_[faces[:32], others[:32]]
    val = np.r_[faces[32:], others[32:]]
    return calib, val
