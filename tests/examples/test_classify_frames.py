"""examples/raspberrypi app pieces without a model loop: the stdlib PNG reader and numpy
preprocessing (what the Pillow-less emulated run relies on), and board detection."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import pytest
from app.board import detect_board, target_warning
from app.frames import Preprocessor, array_to_input, input_spec, read_image

import edgekit
from tests.conftest import SAMPLES

from .classify_env import ARTIFACT, PI4, board_root, put


def test_board_detection(tmp_path: Path) -> None:
    from edgekit.artifact.archive import read_artifact

    manifest = read_artifact(ARTIFACT).manifest
    pi4 = detect_board(str(board_root(tmp_path / "pi4")))
    assert (pi4.model, pi4.target, pi4.source) == (PI4, "rpi4", "/proc/device-tree/model")
    assert target_warning(pi4, manifest, "a.edgekit") is None
    # no device tree: the Model line Raspberry Pi OS kernels add to /proc/cpuinfo
    put(tmp_path / "zero", "proc/cpuinfo", "processor\t: 0\nModel\t\t: Raspberry Pi Zero 2 W "
        "Rev 1.0\nRevision\t: 902120\n")
    zero = detect_board(str(tmp_path / "zero"))
    assert (zero.target, zero.source) == ("rpi-zero2w", "/proc/cpuinfo")
    assert "target 'rpi-zero2w'" in target_warning(zero, manifest, "a.edgekit")
    cm4 = detect_board(str(board_root(tmp_path / "cm4", "Raspberry Pi Compute Module 4 Rev 1.1")))
    assert cm4.target == "rpi4"
    old = detect_board(str(board_root(tmp_path / "pi2", "Raspberry Pi 2 Model B Rev 1.1")))
    assert old.target is None
    assert "has no edgekit target profile" in target_warning(old, manifest, "a.edgekit")


# -- frames without Pillow ----------------------------------------------------------------

def png_bytes(pixels: np.ndarray, color: int, filters: list[int]) -> bytes:
    """A PNG written by hand with the given per-row filter types (RFC 2083 6.2-6.6)."""
    height, width = pixels.shape[:2]
    bpp = 1 if pixels.ndim == 2 else pixels.shape[2]
    rows = pixels.reshape(height, -1).astype(np.int64)
    raw = b""
    for y in range(height):
        line, up = rows[y], rows[y - 1] if y else np.zeros_like(rows[0])
        left = np.concatenate([np.zeros(bpp, np.int64), line[:-bpp]])
        upleft = np.concatenate([np.zeros(bpp, np.int64), up[:-bpp]])
        kind = filters[y % len(filters)]
        if kind == 4:
            p = left + up - upleft
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - upleft)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upleft))
        else:
            pred = [0 * line, left, up, (left + up) // 2][kind]
        raw += bytes([kind]) + ((line - pred) % 256).astype(np.uint8).tobytes()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (len(body).to_bytes(4, "big") + kind + body
                + zlib.crc32(kind + body).to_bytes(4, "big"))

    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, color, 0, 0, 0])
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("color, channels", [(0, 1), (2, 3), (6, 4)])
def test_stdlib_png_reader_matches_pillow(color: int, channels: int, tmp_path: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(color)
    shape = (13, 11) if channels == 1 else (13, 11, channels)
    pixels = rng.integers(0, 256, shape, dtype=np.uint8)
    path = tmp_path / "img.png"
    path.write_bytes(png_bytes(pixels, color, [0, 1, 2, 3, 4]))
    decoded = read_image(str(path))
    np.testing.assert_array_equal(decoded, pixels)
    np.testing.assert_array_equal(decoded, np.asarray(Image.open(path)))


def test_numpy_preprocessing_matches_pillow_on_the_samples(tmp_path: Path) -> None:
    """Without Pillow the model sees bit-identical inputs for model-sized images (the
    emulated run relies on it), also from colour frames converted to gray."""
    from PIL import Image

    from edgekit.runtime.preprocess import check_spec, preprocess_image

    with edgekit.load(ARTIFACT, threads=1) as model:
        spec = input_spec(model)
    for name in sorted(os.listdir(SAMPLES)):
        if name.endswith(".png"):
            path = str(SAMPLES / name)
            np.testing.assert_array_equal(array_to_input(read_image(path), spec),
                                          preprocess_image(path, spec))
    rgb = np.random.default_rng(1).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    np.testing.assert_array_equal(array_to_input(rgb, spec),
                                  preprocess_image(str(tmp_path / "rgb.png"), spec))
    # a colour model: BGR camera buffers are swapped, and both paths crop the same middle
    pre = Preprocessor(check_spec(dict(spec, color="rgb")))
    frame = np.random.default_rng(2).integers(0, 256, (8, 12, 3), dtype=np.uint8)
    x = pre.from_array(frame, "bgr")
    assert x.shape == (1, 3, 8, 8)
    np.testing.assert_array_equal(x, pre.from_array(frame[:, :, ::-1].copy(), "rgb"))
    np.testing.assert_array_equal(x, array_to_input(frame[:, :, ::-1], pre.camera_spec))
    np.testing.assert_allclose(x[0, 0], frame[:, 2:10, 2] / 255.0, rtol=1e-6)  # red = BGR[2]
