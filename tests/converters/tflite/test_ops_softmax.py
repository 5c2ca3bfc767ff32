"""Softmax on any axis, in int8 at LiteRT's fixed output scale: the channel axis is already
last in NHWC (also after [N, C, H, W] -> [N, C, H*W], held as [N, H*W, C]); any other axis is
moved last by one TRANSPOSE."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from .op_parity import build, check

SHAPE = (1, 1, 8, 8)


class Softmax(nn.Module):
    def __init__(self, dim: int, rank: int) -> None:
        super().__init__()
        self.dim, self.rank = dim, rank
        self.a = nn.Conv2d(1, 6, 3, padding=1)

    def forward(self, x):
        y = self.a(x) * 0.5
        if self.rank == 3:
            y = y.flatten(2)  # [N, C, H*W]
        return torch.softmax(y, dim=self.dim)


@pytest.mark.parametrize("dim,rank,transposes", [(1, 4, 0), (2, 4, 1), (3, 4, 1), (1, 3, 0),
                                                 (-1, 3, 1)])
def test_softmax_on_any_axis_is_int8(tmp_path, dim, rank, transposes):
    model = check(build(Softmax(dim, rank), SHAPE, tmp_path), "Softmax")
    assert model.float_ops == [] and model.op_counts["SOFTMAX"] == 1
    assert model.op_counts.get("TRANSPOSE", 0) == transposes, model.op_counts
