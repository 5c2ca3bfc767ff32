"""PRelu in int8: per-channel slopes on NHWC images (MTCNN-style) as the exact select
(tflite/ops/prelu.py), PRelu -> MaxPool (MTCNN's first stage, which onnxruntime leaves float)
and one shared slope after a linear layer as PRELU; LiteRT within one step of onnxruntime's
QDQ model."""

from __future__ import annotations

import torch
from torch import nn

from . import nets
from .op_check import assert_int8_parity, check_op


class ConvPRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.p, self.b = nn.Conv2d(1, 6, 3, padding=1), nn.PReLU(6), nn.Conv2d(6, 4, 1)

    def forward(self, x):
        return self.b(self.p(self.a(x)))


class PReluMaxPool(nn.Module):
    """PNet's first stage: conv, per-channel PRelu with mixed-sign slopes, ceil-mode pool."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.p, self.b = nn.Conv2d(1, 6, 3), nn.PReLU(6), nn.Conv2d(6, 4, 1)
        self.pool = nn.MaxPool2d(2, 2, ceil_mode=True)

    def forward(self, x):
        return self.b(self.pool(self.p(self.a(x))))


class LinearPRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.p, self.b = nn.Linear(64, 16), nn.PReLU(), nn.Linear(16, 10)

    def forward(self, x):
        return self.b(self.p(self.a(x)))


def test_channel_prelu_is_int8(tmp_path):
    result = check_op(ConvPRelu(), (1, 1, 8, 8), tmp_path)
    assert_int8_parity(result, "SELECT_V2")
    assert result.builtins == ["CONV_2D", "DEPTHWISE_CONV_2D", "DEPTHWISE_CONV_2D", "GREATER_EQUAL",
                               "SELECT_V2", "CONV_2D"]


def test_prelu_then_ceil_maxpool_is_int8(tmp_path):
    net = nets.seeded(PReluMaxPool())
    with torch.no_grad():  # slopes of both signs and sizes, like PNet's (-0.53..0.43)
        net.p.weight.copy_(torch.tensor([-0.53, 0.43, 0.04, -0.001, 0.2, 1.01]))
    result = check_op(net, (1, 1, 9, 9), tmp_path, reseed=False)
    assert_int8_parity(result, "MAX_POOL_2D")
    assert "SELECT_V2" in result.builtins


def test_shared_slope_prelu_after_linear_is_int8(tmp_path):
    result = check_op(LinearPRelu(), (1, 64), tmp_path)
    assert_int8_parity(result, "PRELU")
