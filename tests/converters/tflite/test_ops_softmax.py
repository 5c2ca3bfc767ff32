"""Softmax on any axis, in int8 at LiteRT's fixed output scale (on int16 when the graph's
scale is another, then requantized once): the channel axis is already
last in NHWC (also after [N, C, H, W] -> [N, C, H*W], held as [N, H*W, C]); any other axis is
moved last by one TRANSPOSE."""

from __future__ import annotations

import pytest
import torch
from ai_edge_litert.schema_py_generated import TensorType
from torch import nn

from .helpers import ops_of, tensor
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
    # at a graph scale other than the kernel's fixed 1/256 it runs on int16, rounding once
    softmax = next(op for name, op in ops_of(model.data) if name == "SOFTMAX")
    fixed = abs(model.outputs[0]["quantization"]["scale"] * 256 - 1) < 1e-6
    want = TensorType.INT8 if fixed else TensorType.INT16
    assert tensor(model.data, softmax.inputs[0]).type == want
