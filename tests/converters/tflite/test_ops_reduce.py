"""ReduceMean and ReduceMax in int8 (MEAN / REDUCE_MAX) with and without keepdims, over the
channel axis and the spatial axes, read in the NHWC layout."""

from __future__ import annotations

import pytest
from torch import nn

from .op_parity import build, check

SHAPE = (1, 1, 8, 8)


class Reduce(nn.Module):
    def __init__(self, kind: str, dims: tuple[int, ...], keep: bool) -> None:
        super().__init__()
        self.kind, self.dims, self.keep = kind, dims, keep
        self.a = nn.Conv2d(1, 6, 3, padding=1)

    def forward(self, x):
        y = self.a(x)
        r = y.mean(self.dims, self.keep) if self.kind == "mean" else y.amax(self.dims, self.keep)
        return r * 0.5 + 0.25  # an int8 op after it: the reduction is quantized on both sides


@pytest.mark.parametrize("kind,op_type,builtin", [("mean", "ReduceMean", "MEAN"),
                                                   ("max", "ReduceMax", "REDUCE_MAX")])
@pytest.mark.parametrize("dims,keep", [((1,), True), ((1,), False), ((2, 3), False),
                                       ((3,), True)])
def test_reduce_is_int8_and_matches_onnx(tmp_path, kind, op_type, builtin, dims, keep):
    model = check(build(Reduce(kind, dims, keep), SHAPE, tmp_path), op_type)
    assert model.float_ops == [] and model.op_counts.get(builtin) == 1
