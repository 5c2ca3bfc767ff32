"""BatchNormalization left unfused -> one int8 1x1 DEPTHWISE_CONV_2D (k and b folded):
after a ReLU on images (no convolution to fold into), and in 1-D nets on [N, C] and
[N, C, L] tensors; LiteRT within one step of onnxruntime's QDQ model."""

from __future__ import annotations

import onnx
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from . import nets
from .op_check import assert_int8_parity, check_op


def _stats(bn: nn.modules.batchnorm._BatchNorm, seed: int) -> nn.Module:
    """Non-trivial running statistics (a fresh layer has mean 0 and var 1)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(bn.num_features, generator=gen) * 0.5)
        bn.running_var.copy_(torch.rand(bn.num_features, generator=gen) * 2 + 0.1)
    return bn


class ReluBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(1, 6, 3, padding=1), nn.Conv2d(6, 4, 1)
        self.bn = nn.BatchNorm2d(6)

    def forward(self, x):
        return self.b(self.bn(F.relu(self.a(x))))


class Dense1d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(64, 16), nn.Linear(16, 10)
        self.bn = nn.BatchNorm1d(16)

    def forward(self, x):
        return self.b(self.bn(F.relu(self.a(x))))


class Sequence1d(nn.Module):
    """[N, C, L]: BatchNorm1d over channels, then a linear layer along L."""

    def __init__(self) -> None:
        super().__init__()
        self.bn, self.a = nn.BatchNorm1d(8), nn.Linear(8, 6)

    def forward(self, x):
        return self.a(self.bn(x))


def _check(module: nn.Module, shape, tmp_path):
    nets.seeded(module)
    _stats(module.bn, 3)
    result = check_op(module, shape, tmp_path, reseed=False)
    types = [n.op_type for n in onnx.load(str(tmp_path / "int8-uint8.onnx")).graph.node]
    assert "BatchNormalization" in types, types  # not folded away: the case under test
    return result


def test_batchnorm_after_relu_is_one_depthwise_conv(tmp_path):
    result = _check(ReluBN(), (1, 1, 8, 8), tmp_path)
    assert_int8_parity(result, "DEPTHWISE_CONV_2D")
    assert result.builtins == ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D"], result.builtins


def test_batchnorm1d_on_features_is_int8(tmp_path):
    result = _check(Dense1d(), (1, 64), tmp_path)
    assert_int8_parity(result, "DEPTHWISE_CONV_2D")


def test_batchnorm1d_on_sequences_is_int8(tmp_path):
    result = _check(Sequence1d(), (1, 8, 8), tmp_path)
    assert_int8_parity(result, "DEPTHWISE_CONV_2D")
