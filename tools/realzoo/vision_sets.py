"""Image inputs of the vision models, made from photos, LFW faces and rendered text."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

from . import photos, text
from .datasets import CALIB_COUNT, Sets, half_nchw, imagenet_nchw


def _paddle_line(line: np.ndarray, width: int, height: int = 48) -> np.ndarray:
    """PaddleOCR's resize_norm_img: keep the aspect at ``height`` (squeezed to ``width`` when
    longer), normalize to [-1, 1], pad the right with zeros: float32 [3, height, width]."""
    h, w = line.shape[:2]
    new_w = min(width, int(math.ceil(height * w / h)))
    resized = np.asarray(Image.fromarray(line).resize((new_w, height), Image.Resampling.BILINEAR))
    out = np.zeros((3, height, width), np.float32)
    out[:, :, :new_w] = half_nchw(resized[None])[0]
    return out


def _lines(count: int, fonts: tuple[str, ...], seed: int, max_chars: int) -> tuple[list[str], list[np.ndarray]]:
    words = text.phrases(count, seed, 4, max_chars)
    images = [text.render_line(w, fonts[i % len(fonts)], 48, seed + i) for i, w in enumerate(words)]
    return words, images


def ocr_rec() -> Sets:
    def make(count: int, fonts: tuple[str, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
        words, images = _lines(count, fonts, seed, 24)
        return np.stack([_paddle_line(im, 320) for im in images]), np.array(words)

    calib, _ = make(CALIB_COUNT, text.CALIB_FONTS, 1)
    val, words = make(200, text.VAL_FONTS, 2)
    return Sets({"x": calib}, {"x": val}, {"text": words},
                "printed English lines (scikit-learn's dataset descriptions) in DejaVu fonts "
                "from the matplotlib wheel; calibration and validation differ in text and font")


def captcha_lines() -> Sets:
    """ddddocr's input: a grey line at height 64 in [0, 1]; lines are padded with their paper
    tone to one width (256) because calibration batches need one shape."""
    def make(count: int, fonts: tuple[str, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
        words = text.phrases(count, seed, 3, 14)
        out = np.empty((count, 1, 64, 256), np.float32)
        for i, word in enumerate(words):
            line = text.render_line(word, fonts[i % len(fonts)], 64, seed + i)
            page = np.full((64, 256, 3), line[0, 0, 0], np.uint8)
            page[:, :min(256, line.shape[1])] = line[:, :256]
            out[i, 0] = np.asarray(Image.fromarray(page).convert("L"), np.float32) / 255.0
        return out, np.array(words)

    calib, _ = make(CALIB_COUNT, text.CALIB_FONTS, 21)
    val, words = make(200, text.VAL_FONTS, 22)
    return Sets({"input1": calib}, {"input1": val}, {"text": words},
                "printed English lines at height 64, padded to 256 wide, grey in [0, 1]")


def ocr_cls() -> Sets:
    def make(count: int, fonts: tuple[str, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
        _, images = _lines(count, fonts, seed, 28)
        labels = np.arange(count) % 2  # every other line turned 180 degrees
        turned = [np.ascontiguousarray(im[::-1, ::-1]) if flip else im
                  for im, flip in zip(images, labels, strict=True)]
        return np.stack([_paddle_line(im, 192) for im in turned]), labels.astype(np.int64)

    calib, _ = make(CALIB_COUNT, text.CALIB_FONTS, 11)
    val, labels = make(200, text.VAL_FONTS, 12)
    return Sets({"x": calib}, {"x": val}, {"label": labels},
                "printed lines, every other one turned 180 degrees (label '180')")


def _page_box_mask(page: text.Page, size: tuple[int, int]) -> np.ndarray:
    mask = np.zeros(size, np.uint8)
    for x0, y0, x1, y1 in page.boxes:
        mask[y0:y1, x0:x1] = 1
    return mask


def ocr_det(size: tuple[int, int] = (384, 384)) -> Sets:
    def make(count: int, blank_every: int, fonts: tuple[str, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
        pages = [text.render_page(size, fonts, seed + i, blank=(i % blank_every == 0))
                 for i in range(count)]
        images = np.stack([p.image for p in pages])
        return half_nchw(images), np.stack([_page_box_mask(p, size) for p in pages])

    calib, _ = make(CALIB_COUNT, 4, text.CALIB_FONTS, 100)
    val, masks = make(120, 4, text.VAL_FONTS, 5000)
    return Sets({"x": calib}, {"x": val}, {"mask": masks},
                "384x384 pages of printed lines with their line boxes; every 4th page blank")


def orientation() -> Sets:
    def make(count: int, fonts: tuple[str, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
        turns = np.arange(count) % 4
        images = []
        for i, k in enumerate(turns):
            page = text.render_page((320, 320), fonts, seed + i)
            image = Image.fromarray(text.rotate_page(page, int(k)))
            image = image.resize((256, 256), Image.Resampling.LANCZOS)  # resize_short=256
            images.append(np.asarray(image)[16:240, 16:240])  # center crop 224
        return imagenet_nchw(np.stack(images)), turns.astype(np.int64)

    calib, _ = make(CALIB_COUNT, text.CALIB_FONTS, 200)
    val, turns = make(160, text.VAL_FONTS, 7000)
    return Sets({"x": calib}, {"x": val}, {"turns": turns},
                "text pages turned by 0/90/180/270 degrees (np.rot90, counter-clockwise)")


def layout() -> Sets:
    def make(count: int, fonts: tuple[str, ...], seed: int) -> np.ndarray:
        pages = [text.render_page((800, 608), fonts, seed + i) for i in range(count)]
        return imagenet_nchw(np.stack([p.image for p in pages]))

    return Sets({"image": make(CALIB_COUNT, text.CALIB_FONTS, 300)},
                {"image": make(48, text.VAL_FONTS, 9000)}, {},
                "800x608 pages of printed lines (stretched as rapid-layout's PP pre-process)")


def imagenet_photos() -> Sets:
    calib = photos.crops(photos.CALIB_PHOTOS, CALIB_COUNT, 224, 1)
    val = photos.crops(photos.VAL_PHOTOS, 156, 224, 2)
    return Sets({"image": imagenet_nchw(calib)}, {"image": imagenet_nchw(val)}, {},
                "224x224 crops of scikit-image/matplotlib photos; calibration and validation "
                "photos disjoint (by photo)")


def yolo_photos(size: int = 320) -> Sets:
    def make(names: tuple[str, ...], count: int, seed: int) -> np.ndarray:
        images = photos.letterboxed(names, count, size, seed).astype(np.float32) / 255.0
        return np.ascontiguousarray(images.transpose(0, 3, 1, 2))

    return Sets({"images": make(photos.YOLO_CALIB, CALIB_COUNT, 3)},
                {"images": make(photos.YOLO_VAL, 104, 4)}, {},
                f"photos (mostly of people) letterboxed to {size}x{size}, RGB in [0, 1]; "
                "photos disjoint")


def blazeface_photos(calib_count: int = CALIB_COUNT, val_count: int = 128) -> Sets:
    """Faces as a front camera frames them (photos.face_crops: a face 15-60% of the side),
    one crop in 8 of a photo without a face; calibration and held-out photos disjoint."""
    def make(names: tuple[str, ...], count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        images, source = photos.face_crops(names, count, 128, seed)
        # NHWC in [-1, 1], MediaPipe's face detector input
        return images.astype(np.float32) / 127.5 - 1.0, source

    calib, _ = make(photos.FACE_CALIB, calib_count, 5)
    val, source = make(photos.FACE_VAL, val_count, 6)
    return Sets({"input": calib}, {"input": val}, {"photo": source},
                "crops around the faces of person photos (a face 15-60% of the 128x128 side, "
                "boxes set by hand in photos.FACE_BOXES), 1 in 8 of photos without a face; "
                "NHWC in [-1, 1]; calibration and held-out photos disjoint")


def lfw_faces(size: int) -> Sets:
    """LFW crops (faces and not faces) as MTCNN's RNet/ONet see them: RGB, (x - 127.5)/128."""
    images, labels = photos.lfw_subset()
    pixels = np.repeat((images * 255.0)[..., None], 3, axis=-1).astype(np.uint8)
    resized = np.stack([np.asarray(Image.fromarray(p).resize((size, size), Image.Resampling.BILINEAR))
                        for p in pixels])
    x = ((resized.astype(np.float32) - 127.5) * 0.0078125).transpose(0, 3, 1, 2)
    calib, val = photos.lfw_split()
    return Sets({"image": np.ascontiguousarray(x[calib])}, {"image": np.ascontiguousarray(x[val])},
                {"label": labels[val]},
                f"scikit-image's LFW subset (25x25 grey faces / not faces) at {size}x{size}")


def imagenet_objects(per_photo: int = 12, size: int = 224) -> tuple[np.ndarray, np.ndarray]:
    """A held-out set for ImageNet classifiers: crops of photos of one main object
    (photos.OBJECT_PHOTOS, disjoint from imagenet_photos' calibration and validation photos),
    ImageNet-normalized NCHW float32, and each crop's photo index (crops of one photo are not
    independent samples)."""
    crops, source = photos.object_crops(per_photo, size, seed=34)
    return imagenet_nchw(crops), source
