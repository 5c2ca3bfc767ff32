"""ConvTranspose -> int8 TRANSPOSE_CONV: every padding case (LiteRT's SAME, VALID, and the
VALID + STRIDED_SLICE crop), output_padding, a fused ReLU, uint8 and int8 activations."""

from __future__ import annotations

import pytest
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from .helpers import ops_of
from .op_parity import build, check

SHAPE = (1, 1, 8, 8)


class Up(nn.Module):
    def __init__(self, k: int, stride: int, pad: int, out_pad: int, relu: bool) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.up = nn.ConvTranspose2d(4, 6, k, stride=stride, padding=pad,
                                     output_padding=out_pad)
        self.relu = relu

    def forward(self, x):
        y = self.up(F.relu(self.stem(x)))
        return F.relu(y) if self.relu else y


@pytest.mark.parametrize("k,stride,pad,out_pad,relu,activation,slices", [
    (4, 2, 1, 0, True, "uint8", 0),    # DBNet/U-Net style x2: LiteRT SAME
    (2, 2, 0, 0, False, "int8", 0),    # no crop: VALID
    (3, 2, 1, 1, False, "uint8", 1),   # crop 1 that SAME does not give: VALID + slice
    (3, 1, 1, 0, True, "int8", 0),     # stride 1
    (5, 2, 2, 1, False, "int8", 1),
])
def test_convtranspose_is_int8_and_matches_onnx(tmp_path, k, stride, pad, out_pad, relu,
                                                 activation, slices):
    path = build(Up(k, stride, pad, out_pad, relu), SHAPE, tmp_path, activation)
    model = check(path, "ConvTranspose")
    assert model.float_ops == []
    names = [name for name, _ in ops_of(model.data)]
    assert names.count("TRANSPOSE_CONV") == 1 and names.count("STRIDED_SLICE") == slices
    assert "DEQUANTIZE" not in names and "TRANSPOSE" not in names
    # a ReLU after it costs no op: folded into the output range or fused into the op
    assert "RELU" not in names
