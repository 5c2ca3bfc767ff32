"""The activations the writer already had, checked one by one in int8: ReLU6 and a general
Clip, LeakyRelu, Sigmoid and Tanh (the last two at LiteRT's fixed output scales,
requantized); LiteRT within one step of onnxruntime's QDQ model, at the activation's own
output and after the layer that follows."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from .op_check import assert_int8_parity, check_op, op_output_steps

SHAPE = (1, 1, 8, 8)

CASES = {
    # name: (function, ONNX op, LiteRT builtin)
    "relu6": (F.relu6, "Clip", "RELU6"),
    "clip": (lambda y: torch.clamp(y, -0.5, 1.5), "Clip", "MAXIMUM"),
    "leaky_relu": (lambda y: F.leaky_relu(y, 0.1), "LeakyRelu", "LEAKY_RELU"),
    "sigmoid": (torch.sigmoid, "Sigmoid", "LOGISTIC"),
    "tanh": (torch.tanh, "Tanh", "TANH"),
}


class Net(nn.Module):
    def __init__(self, case: str) -> None:
        super().__init__()
        self.fn = CASES[case][0]
        self.a, self.b = nn.Conv2d(1, 6, 3, padding=1), nn.Conv2d(6, 4, 1)

    def forward(self, x):
        y = self.a(x)
        # y feeds two ops, so onnxruntime cannot fold a Clip into the Q before it
        return self.b(self.fn(y) + y)


@pytest.mark.parametrize("case", sorted(CASES))
def test_activation_is_int8(case, tmp_path):
    _, op_type, builtin = CASES[case]
    result = check_op(Net(case), SHAPE, tmp_path)
    assert_int8_parity(result, builtin)
    if op_type != "Clip":  # a Clip's input and output share one scale: nothing to round
        steps = op_output_steps(tmp_path, SHAPE, op_type)
        assert steps.max() <= 1.0 + 1e-3, steps.max()
