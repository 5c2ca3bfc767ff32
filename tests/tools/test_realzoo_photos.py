"""The held-out object photos (issue 34): ImageNet-like photos from pinned wheels, disjoint
from every photo the suite calibrates, validates or distils on; crops seeded and centred."""

from __future__ import annotations

import hashlib

import numpy as np
from PIL import Image

from tools.realzoo import photos

# the distillation photos of tools/benchmarks/bench_prune_levers.py (calibration + 3 more)
DISTILL_EXTRA = ("chessboard_RGB.png", "chessboard_GRAY.png", "microaneurysms.png")


def _digest(image: np.ndarray) -> str:
    small = np.asarray(Image.fromarray(image).resize((32, 32), Image.Resampling.BILINEAR))
    return hashlib.sha256((small // 16).tobytes()).hexdigest()


def test_object_photos_are_distinct_photos_none_of_them_a_suite_photo() -> None:
    suite = photos.CALIB_PHOTOS + photos.VAL_PHOTOS + DISTILL_EXTRA
    taken = {_digest(photos.photo(name)) for name in suite}
    objects = [_digest(photos.object_photo(name)) for name in photos.OBJECT_PHOTOS]
    assert len(set(objects)) == len(objects), "a photo is in OBJECT_PHOTOS twice"
    assert not taken & set(objects), "an object photo is also a calibration/validation photo"
    for name in photos.OBJECT_PHOTOS:
        h, w, c = photos.object_photo(name).shape
        assert c == 3 and min(h, w) >= 224, f"{name}: {w}x{h} is smaller than the model input"


def test_object_crops_start_with_the_centre_crop_and_are_seeded() -> None:
    crops, source = photos.object_crops(3, 64, seed=5)
    count = len(photos.OBJECT_PHOTOS)
    assert crops.shape == (3 * count, 64, 64, 3) and crops.dtype == np.uint8
    np.testing.assert_array_equal(source, np.repeat(np.arange(count), 3))
    image = photos.object_photo("lion")
    h, w = image.shape[:2]
    side = round(min(h, w) * 224 / 256)
    top, left = (h - side) // 2, (w - side) // 2
    centre = Image.fromarray(image[top:top + side, left:left + side]).resize(
        (64, 64), Image.Resampling.BILINEAR)
    first = 3 * list(photos.OBJECT_PHOTOS).index("lion")
    np.testing.assert_array_equal(crops[first], np.asarray(centre))
    again, _ = photos.object_crops(3, 64, seed=5)
    other, _ = photos.object_crops(3, 64, seed=6)
    np.testing.assert_array_equal(crops, again)
    np.testing.assert_array_equal(crops[::3], other[::3])  # the centre crops do not move
    assert not np.array_equal(crops[1::3], other[1::3])
