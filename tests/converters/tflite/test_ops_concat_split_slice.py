"""Concat, Split and Slice in int8, requantizing when the input and output scales differ
(LiteRT's int8 CONCATENATION wants one scale; SPLIT_V and STRIDED_SLICE copy bytes)."""

from __future__ import annotations

import torch
from torch import nn

from .op_parity import build, check

SHAPE = (1, 1, 8, 8)


class ConcatScales(nn.Module):
    """Two branches of very different ranges concatenated on channels (a requantization)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(1, 4, 3, padding=1), nn.Conv2d(1, 4, 1)

    def forward(self, x):
        return torch.cat([self.a(x) * 8.0, torch.relu(self.b(x)) * 0.05], dim=1)


class SplitSlice(nn.Module):
    """Split on channels with outputs rescaled apart, and strided slices on H and W."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(1, 8, 3, padding=1)

    def forward(self, x):
        y = self.a(x)
        u, v = torch.split(y, [3, 5], dim=1)
        return u * 4.0, v[:, 1:4, 1:7:2, ::2] + 1.0


def test_concat_with_different_scales_requantizes_in_int8(tmp_path):
    path = build(ConcatScales(), SHAPE, tmp_path)
    model = check(path, "Concat")
    assert model.float_ops == [] and model.op_counts["CONCATENATION"] == 1
    assert model.op_counts.get("QUANTIZE", 0) >= 1  # int8 -> int8 rescale of a branch
    assert "DEQUANTIZE" not in model.op_counts


def test_split_and_slice_are_int8(tmp_path):
    model = check(build(SplitSlice(), SHAPE, tmp_path, "int8"), "Split")
    assert model.float_ops == []
    assert model.op_counts["SPLIT_V"] == 1 and model.op_counts["STRIDED_SLICE"] >= 1
