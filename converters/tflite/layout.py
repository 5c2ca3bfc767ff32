"""Layouts: how a TFLite tensor's axes relate to the ONNX tensor it stands for.

A layout is a permutation ``perm`` with ``tflite_tensor = onnx_tensor.transpose(perm)``.
ONNX images are NCHW and LiteRT kernels want NHWC, so a 4-D activation usually carries
``NHWC = (0, 2, 3, 1)``; everything else starts with the identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from edgekit.converters.tflite.quant import QParams
from edgekit.converters.tflite.writer import Tensor

Perm = tuple[int, ...]
NHWC: Perm = (0, 2, 3, 1)


def identity(rank: int) -> Perm:
    return tuple(range(rank))


def inverse(perm: Perm) -> Perm:
    return tuple(int(i) for i in np.argsort(perm))


def permute(shape: tuple[int, ...], perm: Perm) -> tuple[int, ...]:
    return tuple(shape[i] for i in perm)


def tfl_axis(perm: Perm, onnx_axis: int) -> int:
    """Where ONNX axis ``onnx_axis`` sits in the TFLite tensor."""
    return perm.index(onnx_axis % len(perm))


def transpose_between(current: Perm, wanted: Perm) -> Perm:
    """TRANSPOSE perm taking a tensor laid out as ``current`` to ``wanted``."""
    inv = inverse(current)
    return tuple(inv[a] for a in wanted)


def order_preserving(onnx_shape: tuple[int, ...], a: Perm, b: Perm) -> bool:
    """True when layouts a and b hold the same bytes (only size-1 axes move): a RESHAPE
    converts one into the other, or nothing at all for flatten-like ops."""
    keep_a = [i for i in a if onnx_shape[i] != 1]
    keep_b = [i for i in b if onnx_shape[i] != 1]
    return keep_a == keep_b


def layout_name(perm: Perm) -> str:
    """'NHWC' for a 4-D tensor held channels-last; '' when it is held as the ONNX graph
    has it (the manifest's layout) or some other permutation (see ``perm``)."""
    return "NHWC" if perm == NHWC else ""


@dataclass
class Value:
    """An ONNX tensor as it exists in the TFLite model being written.

    ``tensor`` is None for constants not yet written: they are materialized per layout on
    demand. ``qparams`` None means float32. ``feature_perm`` marks a flatten written in NHWC
    order: column j of the TFLite matrix is ONNX column ``feature_perm[j]``; only a fully
    connected consumer (which permutes its weights instead) may read it.
    """

    onnx_shape: tuple[int, ...]
    perm: Perm
    qparams: QParams | None
    tensor: Tensor | None = None
    const: np.ndarray | None = None  # ONNX-layout data (int8 when qparams, else float)
    feature_perm: np.ndarray | None = None
    cache: dict = field(default_factory=dict, repr=False)

    @property
    def rank(self) -> int:
        return len(self.onnx_shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """TFLite shape."""
        return permute(self.onnx_shape, self.perm)

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def quantized(self) -> bool:
        return self.qparams is not None
