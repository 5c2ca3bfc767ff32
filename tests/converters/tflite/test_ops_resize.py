"""Resize in int8: nearest and bilinear (half-pixel and align-corners), up and down."""

from __future__ import annotations

import pytest
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from .op_parity import build, check

SHAPE = (1, 1, 8, 8)


class Resize(nn.Module):
    def __init__(self, mode: str, size: int, align: bool | None) -> None:
        super().__init__()
        self.mode, self.size, self.align = mode, size, align
        self.a = nn.Conv2d(1, 4, 3, padding=1)

    def forward(self, x):
        return F.interpolate(F.relu(self.a(x)), size=(self.size, self.size), mode=self.mode,
                             align_corners=self.align)


@pytest.mark.parametrize("mode,size,align,builtin", [
    ("nearest", 16, None, "RESIZE_NEAREST_NEIGHBOR"),
    ("bilinear", 16, False, "RESIZE_BILINEAR"),
    ("bilinear", 13, True, "RESIZE_BILINEAR"),
    ("bilinear", 5, False, "RESIZE_BILINEAR"),
])
@pytest.mark.parametrize("activation", ["uint8", "int8"])
def test_resize_is_int8_and_matches_onnx(tmp_path, mode, size, align, builtin, activation):
    model = check(build(Resize(mode, size, align), SHAPE, tmp_path, activation), "Resize")
    assert model.float_ops == [] and model.op_counts.get(builtin) == 1
    assert "DEQUANTIZE" not in model.op_counts
