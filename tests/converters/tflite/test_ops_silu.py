"""SiLU, x * Sigmoid(x) as PyTorch exports it: int8 LOGISTIC then int8 MUL, nothing float;
LiteRT within one step of onnxruntime's QDQ model on random and digit inputs."""

from __future__ import annotations

import onnx
import torch.nn.functional as F  # noqa: N812
from torch import nn

from .op_check import assert_int8_parity, check_op


class SiLUNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(1, 6, 3, padding=1), nn.Conv2d(6, 4, 1)

    def forward(self, x):
        return self.b(F.silu(self.a(x)))


def test_silu_is_int8_logistic_and_mul(tmp_path):
    result = check_op(SiLUNet(), (1, 1, 8, 8), tmp_path)
    types = [n.op_type for n in onnx.load(str(tmp_path / "int8-uint8.onnx")).graph.node]
    assert "Sigmoid" in types and "Mul" in types, types
    assert_int8_parity(result, "LOGISTIC")
    # LOGISTIC writes at LiteRT's fixed 1/256 scale; one int8 QUANTIZE moves it to the Mul's
    assert result.builtins == ["CONV_2D", "LOGISTIC", "QUANTIZE", "MUL", "CONV_2D"], \
        result.builtins
