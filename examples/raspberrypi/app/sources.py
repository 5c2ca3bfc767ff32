"""Where frames come from: the Pi camera, a V4L2 camera, or image files.

``auto`` tries, in order: the Raspberry Pi camera through picamera2 (libcamera), a V4L2
device (a USB webcam) through OpenCV, then the image files given with ``--images``. Each
source that is not available says why, and when none is, ``NoSourceError`` lists every
reason so that the fix is obvious.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.frames import HAVE_PILLOW, STDLIB_SUFFIXES
from edgekit.errors import UserError
from edgekit.runtime.preprocess import IMAGE_SUFFIXES

KINDS = ("auto", "picamera2", "v4l2", "images")


class NoSourceError(UserError):
    """Neither a camera nor images: nothing to classify."""


class SourceUnavailable(Exception):
    """One source cannot be used here; the message says why (collected by open_source)."""


@dataclass
class Frame:
    index: int
    name: str  # file path, or "<camera>#<n>"
    t: float  # perf_counter() at capture: end-to-end latency starts here
    path: str | None = None  # image files: preprocessed from the file itself
    pixels: np.ndarray | None = None  # camera frames: uint8 HxWx3
    order: str = "rgb"


class ImageSource:
    """Image files and folders (sorted); ``loop`` re-lists them on every pass, so files
    dropped into a watched folder are picked up."""

    kind = "images"

    def __init__(self, paths: list[str], loop: bool = False) -> None:
        self.paths = list(paths)
        self.loop = loop
        self.rejected: set[str] = set()  # unreadable files, skipped on later passes
        self.name = ", ".join(self.paths)
        self.files = self.list_files()

    def list_files(self) -> list[str]:
        suffixes = IMAGE_SUFFIXES if HAVE_PILLOW else STDLIB_SUFFIXES
        files: list[str] = []
        for path in self.paths:
            if os.path.isdir(path):
                files += sorted(os.path.join(path, f) for f in os.listdir(path)
                                if f.lower().endswith(suffixes))
            elif os.path.isfile(path):
                files.append(path)
            else:
                raise NoSourceError(f"--images {path}: no such file or folder (expected an "
                                    "image file or a folder of images)")
        files = [f for f in files if f not in self.rejected]
        if not files and self.rejected:
            raise NoSourceError(f"--images {self.name}: none of the images is readable "
                                f"({len(self.rejected)} skipped)")
        if not files:
            raise NoSourceError(
                f"--images {self.name}: no image files found (expected {', '.join(suffixes)}"
                f"{'' if HAVE_PILLOW else '; more formats with: pip install pillow'})")
        return files

    def reject(self, path: str | None) -> None:
        if path is not None:
            self.rejected.add(path)

    def frames(self) -> Iterator[Frame]:
        index = 0
        while True:
            for path in self.files:
                yield Frame(index, path, time.perf_counter(), path=path)
                index += 1
            if not self.loop:
                return
            self.files = self.list_files()

    def close(self) -> None:
        pass


class Picamera2Source:
    """The Raspberry Pi camera (CSI) through libcamera. RGB888 buffers are [B, G, R]."""

    kind = "picamera2"

    def __init__(self, size: tuple[int, int], camera: int = 0) -> None:
        try:
            from picamera2 import Picamera2
        except ImportError as exc:
            raise SourceUnavailable(
                "picamera2: not importable (sudo apt install python3-picamera2, and create "
                f"the venv with --system-site-packages) [{exc}]") from exc
        except ValueError as exc:
            # apt's simplejpeg is built for Debian's numpy 1.24; a venv with numpy 2 (which
            # ai-edge-litert pulls in) fails here with "numpy.dtype size changed"
            raise SourceUnavailable(
                f"picamera2: import failed ({exc}); in the venv run: pip install "
                "--force-reinstall simplejpeg (see README, 'Camera')") from exc
        if not Picamera2.global_camera_info():
            raise SourceUnavailable("picamera2: no camera connected (libcamera lists none)")
        try:
            self.camera = Picamera2(camera)
            config = self.camera.create_video_configuration(
                main={"size": size, "format": "RGB888"})
            self.camera.configure(config)
            self.camera.start()
        except Exception as exc:  # libcamera raises RuntimeError and friends
            raise SourceUnavailable(f"picamera2: camera {camera} did not start ({exc})") from exc
        self.name = f"picamera2 camera {camera} {size[0]}x{size[1]}"

    def frames(self) -> Iterator[Frame]:
        index = 0
        while True:
            pixels = self.camera.capture_array("main")
            yield Frame(index, f"<picamera2>#{index}", time.perf_counter(), pixels=pixels,
                        order="bgr")
            index += 1

    def close(self) -> None:
        self.camera.stop()
        self.camera.close()


def v4l2_devices(root: str = "/") -> list[str]:
    """Capture devices first (udev's by-id links name real cameras), then every node."""
    by_id = sorted(glob.glob(os.path.join(root, "dev/v4l/by-id/*-video-index0")))
    nodes = sorted(glob.glob(os.path.join(root, "dev/video[0-9]*")),
                   key=lambda p: int(p.rsplit("video", 1)[1]))
    seen, out = set(), []
    for path in by_id + nodes:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            out.append(path)
    return out


class OpenCVSource:
    """A V4L2 camera through OpenCV. Many /dev/video* nodes on a Pi are codecs or the ISP,
    so each candidate must deliver a frame before it is used."""

    kind = "v4l2"

    def __init__(self, size: tuple[int, int], device: str | None = None, root: str = "/"
                 ) -> None:
        try:
            import cv2
        except ImportError as exc:
            raise SourceUnavailable(
                "v4l2: OpenCV not importable (sudo apt install python3-opencv, venv with "
                f"--system-site-packages; or pip install opencv-python-headless) [{exc}]"
            ) from exc
        candidates = [device] if device else v4l2_devices(root)
        if not candidates:
            raise SourceUnavailable(
                f"v4l2: no video device under {os.path.join(root, 'dev')} (no /dev/video*)")
        tried = []
        for path in candidates:
            capture = cv2.VideoCapture(path, cv2.CAP_V4L2)
            if capture.isOpened():
                capture.set(cv2.CAP_PROP_FRAME_WIDTH, size[0])
                capture.set(cv2.CAP_PROP_FRAME_HEIGHT, size[1])
                ok, first = capture.read()
                if ok and first is not None:
                    self.capture, self.first, self.name = capture, first, f"v4l2 {path}"
                    return
            capture.release()
            tried.append(path)
        raise SourceUnavailable(f"v4l2: no device delivered a frame (tried {', '.join(tried)})")

    def frames(self) -> Iterator[Frame]:
        index, pending = 0, self.first
        while True:
            if pending is None:
                ok, pending = self.capture.read()
                if not ok:
                    raise UserError(f"{self.name}: the camera stopped delivering frames")
            yield Frame(index, f"<v4l2>#{index}", time.perf_counter(), pixels=pending,
                        order="bgr")
            pending = None
            index += 1

    def close(self) -> None:
        self.capture.release()


def open_source(kind: str = "auto", images: list[str] | None = None, loop: bool = False,
                size: tuple[int, int] = (640, 480), camera: int = 0,
                device: str | None = None, root: str = "/") -> Any:
    """The first usable source of ``kind`` (see the module docstring)."""
    if kind not in KINDS:
        raise UserError(f"--source must be one of {', '.join(KINDS)}; got {kind!r}")
    reasons: list[str] = []
    if kind in ("auto", "picamera2"):
        try:
            return Picamera2Source(size, camera)
        except SourceUnavailable as exc:
            reasons.append(str(exc))
    if kind in ("auto", "v4l2"):
        try:
            return OpenCVSource(size, device, root)
        except SourceUnavailable as exc:
            reasons.append(str(exc))
    if kind in ("auto", "images"):
        if images:
            return ImageSource(images, loop=loop)
        reasons.append("images: none given (--images FILE_OR_FOLDER ...)")
    wanted = "no camera and no images" if kind == "auto" else f"--source {kind} is unavailable"
    raise NoSourceError(
        f"nothing to classify: {wanted}.\n  - " + "\n  - ".join(reasons)
        + "\nConnect a camera (Pi camera or USB webcam), or pass --images FILE_OR_FOLDER.")
