"""HardSwish and HardSigmoid in int8: HardSwish and x * HardSigmoid(x) -> HARD_SWISH;
HardSigmoid alone (squeeze-excite gates) -> ADD with a fused RELU6 and an exact MUL, one
rounding; LiteRT within one step of onnxruntime's QDQ model."""

from __future__ import annotations

import torch.nn.functional as F  # noqa: N812
from torch import nn

from .op_check import assert_int8_parity, check_op, op_output_steps

SHAPE = (1, 1, 8, 8)


class Net(nn.Module):
    def __init__(self, case: str) -> None:
        super().__init__()
        self.case = case
        self.a, self.b = nn.Conv2d(1, 6, 3, padding=1), nn.Conv2d(6, 4, 1)
        self.se = nn.Conv2d(6, 6, 1)

    def forward(self, x):
        y = self.a(x)
        if self.case == "hardswish":
            y = F.hardswish(y)
        elif self.case == "pattern":
            y = y * F.hardsigmoid(y)
        elif self.case == "gate":  # squeeze-excite: a gate on other values
            y = F.relu(y) * F.hardsigmoid(self.se(F.avg_pool2d(y, 8)))
        else:
            y = F.hardsigmoid(y)
        return self.b(y)


def test_hardswish_is_int8_hard_swish(tmp_path):
    result = check_op(Net("hardswish"), SHAPE, tmp_path)
    assert_int8_parity(result, "HARD_SWISH")


def test_x_times_hardsigmoid_x_is_one_hard_swish(tmp_path):
    result = check_op(Net("pattern"), SHAPE, tmp_path)
    assert_int8_parity(result, "HARD_SWISH")
    assert result.builtins == ["CONV_2D", "HARD_SWISH", "CONV_2D"], result.builtins


def test_hardsigmoid_alone_is_int8_add_and_mul(tmp_path):
    result = check_op(Net("hardsigmoid"), SHAPE, tmp_path)
    assert_int8_parity(result, "ADD")
    assert result.builtins == ["CONV_2D", "ADD", "MUL", "CONV_2D"], result.builtins
    steps = op_output_steps(tmp_path, SHAPE, "HardSigmoid")
    assert steps.max() <= 1.0 + 1e-3, steps.max()


def test_squeeze_excite_gate_is_int8(tmp_path):
    result = check_op(Net("gate"), SHAPE, tmp_path)
    assert_int8_parity(result, "MUL")
