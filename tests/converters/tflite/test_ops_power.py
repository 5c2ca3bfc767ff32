"""Pow and Sqrt: Pow(x, 2) -> int8 MUL(x, x), Pow(x, 0.5) and Sqrt -> int8 SQRT (a RELU
first when the input's int8 range reaches below zero), other exponents float POW, listed;
LiteRT within one step of onnxruntime's QDQ model."""

from __future__ import annotations

import onnx
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from .op_check import assert_int8_parity, check_op, op_output_steps

SHAPE = (1, 1, 8, 8)


class Power(nn.Module):
    def __init__(self, exponent: float, sqrt: bool = False) -> None:
        super().__init__()
        self.exponent, self.sqrt = exponent, sqrt
        self.a, self.b = nn.Conv2d(1, 6, 3, padding=1), nn.Conv2d(6, 4, 1)

    def forward(self, x):
        y = F.relu(self.a(x)) + 0.25 if self.exponent != 2 else self.a(x)
        y = torch.sqrt(y) if self.sqrt else torch.pow(y, self.exponent)
        return self.b(y)


def _types(tmp_path, activation: str = "uint8") -> list[str]:
    return [n.op_type for n in onnx.load(str(tmp_path / f"int8-{activation}.onnx")).graph.node]


def test_square_is_int8_mul(tmp_path):
    result = check_op(Power(2.0), SHAPE, tmp_path)
    assert "Pow" in _types(tmp_path)
    assert_int8_parity(result, "MUL")


# LiteRT's int8 SQRT truncates (measured: its output is 0 to 1 step below the exact root,
# where onnxruntime rounds), so the check is made at SQRT's own output, within one step;
# the 1x1 convolution after it can make one step several.


def _sqrt_checked(net: nn.Module, tmp_path, op_type: str, activation: str = "uint8"):
    result = check_op(net, SHAPE, tmp_path, activation=activation)
    assert op_type in _types(tmp_path, activation)
    assert result.model.float_ops == [] and "DEQUANTIZE" not in result.builtins
    assert "SQRT" in result.builtins, result.builtins
    steps = op_output_steps(tmp_path, SHAPE, op_type, activation)
    assert steps.max() <= 1.0 + 1e-3, steps.max()
    return result


def test_square_root_by_pow_is_int8_sqrt(tmp_path):
    _sqrt_checked(Power(0.5), tmp_path, "Pow")


def test_sqrt_is_int8_sqrt(tmp_path):
    _sqrt_checked(Power(0.5, sqrt=True), tmp_path, "Sqrt")


def test_sqrt_of_a_signed_range_clears_negatives_first(tmp_path):
    # symmetric int8 activations: the input's range reaches below zero
    result = _sqrt_checked(Power(0.5, sqrt=True), tmp_path, "Sqrt", activation="int8")
    i = result.builtins.index("SQRT")
    assert result.builtins[i - 1] == "RELU", result.builtins


def test_other_exponents_are_float_pow_and_listed(tmp_path):
    result = check_op(Power(3.0), SHAPE, tmp_path)
    assert [o["op_type"] for o in result.model.float_ops] == ["Pow"]
    i = result.builtins.index("POW")
    assert result.builtins[i - 1] == "DEQUANTIZE" and result.builtins[i + 1] == "QUANTIZE"
    assert result.within_random >= 0.99 and result.within_digits >= 0.99
