"""Grouped ConvTranspose (depthwise x2 upsampling, as light segmentation heads use) -> SPLIT,
one int8 TRANSPOSE_CONV per group, CONCATENATION. Weights per tensor: onnxruntime 1.32's
quantizer fails on per-channel grouped ConvTranspose (bias scales C_out/g long for C_out
biases)."""

from __future__ import annotations

import numpy as np
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from . import nets
from .helpers import ops_of, quantize
from .op_parity import check, digits, random

SHAPE = (1, 1, 8, 8)


class GroupedUp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.up = nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1, groups=2)

    def forward(self, x):
        return self.up(F.relu(self.stem(x)))


def test_grouped_convtranspose_is_int8_and_matches_onnx(tmp_path):
    src = nets.export(nets.seeded(GroupedUp()), SHAPE, tmp_path / "float.onnx")
    calib = np.concatenate([random(SHAPE, 16, seed=1)["x"], digits(SHAPE, 16)["x"]])
    path = quantize(src, tmp_path, {"x": calib}, "int8", per_channel=False)
    model = check(path, "ConvTranspose")
    assert model.float_ops == []
    names = [name for name, _ in ops_of(model.data)]
    assert names.count("TRANSPOSE_CONV") == 2 and "SPLIT" in names
    assert "CONCATENATION" in names and "DEQUANTIZE" not in names
