"""PRelu -> int8 PRELU: per-channel slopes on NHWC images (MTCNN-style) and one shared
slope after a linear layer; LiteRT within one step of onnxruntime's QDQ model."""

from __future__ import annotations

from torch import nn

from .op_check import assert_int8_parity, check_op


class ConvPRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.p, self.b = nn.Conv2d(1, 6, 3, padding=1), nn.PReLU(6), nn.Conv2d(6, 4, 1)

    def forward(self, x):
        return self.b(self.p(self.a(x)))


class LinearPRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.p, self.b = nn.Linear(64, 16), nn.PReLU(), nn.Linear(16, 10)

    def forward(self, x):
        return self.b(self.p(self.a(x)))


def test_channel_prelu_is_int8(tmp_path):
    result = check_op(ConvPRelu(), (1, 1, 8, 8), tmp_path)
    assert_int8_parity(result, "PRELU")
    assert result.builtins == ["CONV_2D", "PRELU", "CONV_2D"]


def test_shared_slope_prelu_after_linear_is_int8(tmp_path):
    result = check_op(LinearPRelu(), (1, 64), tmp_path)
    assert_int8_parity(result, "PRELU")
