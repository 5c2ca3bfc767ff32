"""MaxPool in int8: plain, strided with padding (a PADV2 at the int8 minimum), ceil mode."""

from __future__ import annotations

import pytest
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from .op_parity import build, check

SHAPE = (1, 1, 8, 8)


class Pool(nn.Module):
    def __init__(self, k: int, stride: int, pad: int, ceil: bool) -> None:
        super().__init__()
        self.args = (k, stride, pad, 1, ceil)
        self.a = nn.Conv2d(1, 4, 3, padding=1)

    def forward(self, x):
        return F.max_pool2d(self.a(x), *self.args)


@pytest.mark.parametrize("k,stride,pad,ceil", [(2, 2, 0, False), (3, 2, 1, False),
                                               (3, 2, 0, True), (3, 1, 1, False)])
def test_maxpool_is_int8(tmp_path, k, stride, pad, ceil):
    model = check(build(Pool(k, stride, pad, ceil), SHAPE, tmp_path, "int8"), "MaxPool")
    assert model.float_ops == [] and model.op_counts["MAX_POOL_2D"] == 1
