"""Printed text rendered with fonts that ship in wheels (matplotlib's DejaVu family), for the
OCR models: text lines with their ground truth, and pages with their text boxes.

The words are real English prose: scikit-learn's dataset descriptions (``sklearn/datasets/
descr/*.rst``, in the scikit-learn wheel the project already installs).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from . import pins
from .wheels import member

FONT_FILES = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf",
              "DejaVuSans-Oblique.ttf", "DejaVuSerif-Bold.ttf")
CALIB_FONTS = FONT_FILES[:3]  # calibration and validation also differ by font
VAL_FONTS = FONT_FILES[3:]


@cache
def _font_bytes(name: str) -> bytes:
    return member(pins.MATPLOTLIB, f"matplotlib/mpl-data/fonts/ttf/{name}")


def font(name: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(io.BytesIO(_font_bytes(name)), size)


@cache
def corpus_words() -> tuple[str, ...]:
    """The words of scikit-learn's dataset descriptions, plain ASCII, markup stripped."""
    words: list[str] = []
    folder = resources.files("sklearn.datasets.descr")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".rst"):
            continue
        text = entry.read_text(encoding="utf-8", errors="ignore")
        for word in re.findall(r"[A-Za-z0-9][A-Za-z0-9.,;:()%'-]*", text):
            if len(word) <= 14 and word.isascii():
                words.append(word)
    return tuple(words)


def phrases(count: int, seed: int, min_chars: int = 8, max_chars: int = 28) -> list[str]:
    """``count`` runs of consecutive corpus words, each ``min_chars``..``max_chars`` long."""
    words, rng, out = corpus_words(), np.random.default_rng(seed), []
    while len(out) < count:
        start, line = int(rng.integers(0, len(words) - 8)), ""
        limit = int(rng.integers(min_chars, max_chars + 1))
        for word in words[start:start + 8]:
            if len(line) + len(word) + 1 > limit:
                break
            line = f"{line} {word}".strip()
        if len(line) >= min_chars // 2:
            out.append(line)
    return out


def render_line(text: str, font_name: str, height: int = 48, seed: int = 0) -> np.ndarray:
    """A cropped printed text line as RGB uint8 [height, W, 3]: dark ink on a light paper
    tone, a few pixels of margin, as a detector's crop looks."""
    rng = np.random.default_rng(seed)
    size = int(height * rng.uniform(0.55, 0.75))
    face = font(font_name, size)
    left, top, right, bottom = face.getbbox(text)
    margin = int(rng.integers(2, 6))
    paper, ink = int(rng.integers(200, 256)), int(rng.integers(0, 70))
    image = Image.new("L", (right - left + 2 * margin, height), paper)
    ImageDraw.Draw(image).text((margin - left, (height - (bottom - top)) // 2 - top), text,
                               font=face, fill=ink)
    return np.asarray(image.convert("RGB"))


@dataclass
class Page:
    image: np.ndarray  # RGB uint8 [H, W, 3]
    boxes: list[tuple[int, int, int, int]]  # text line boxes (x0, y0, x1, y1)


def render_page(size: tuple[int, int], fonts: tuple[str, ...], seed: int,
                blank: bool = False) -> Page:
    """A page of printed lines at random places (or a blank page: paper only), with each
    line's box, the ground truth of a text detector."""
    rng = np.random.default_rng(seed)
    h, w = size
    paper = int(rng.integers(215, 256))
    image = Image.new("L", (w, h), paper)
    boxes: list[tuple[int, int, int, int]] = []
    if not blank:
        draw, y = ImageDraw.Draw(image), int(rng.integers(4, 30))
        lines = phrases(40, seed + 1000, 6, 40)
        for text in lines:
            face = font(fonts[int(rng.integers(len(fonts)))], int(rng.integers(12, 26)))
            x0, y0, x1, y1 = face.getbbox(text)
            x = int(rng.integers(4, max(5, w // 3)))
            if y + (y1 - y0) + 4 > h:
                break
            if x + (x1 - x0) > w - 4:
                y += int(rng.integers(4, 16))
                continue
            draw.text((x - x0, y - y0), text, font=face, fill=int(rng.integers(0, 80)))
            boxes.append((x, y, x + x1 - x0, y + y1 - y0))
            y += (y1 - y0) + int(rng.integers(6, 30))
    return Page(np.asarray(image.convert("RGB")), boxes)


def rotate_page(page: Page, quarter_turns: int) -> np.ndarray:
    """The page turned counter-clockwise by 90 degrees x ``quarter_turns``."""
    return np.ascontiguousarray(np.rot90(page.image, quarter_turns))
