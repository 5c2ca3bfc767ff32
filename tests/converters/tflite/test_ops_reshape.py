"""Reshape/Transpose variants under the NCHW -> NHWC layout: the ShuffleNetV2 channel
shuffle (Reshape-Transpose-Reshape) costs one TRANSPOSE and stays NHWC, token flattening
[N, C, H, W] -> [N, C, H*W] -> [N, H*W, C] costs none, Squeeze/Unsqueeze are RESHAPEs."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from .helpers import ops_of
from .op_parity import build, check

SHAPE = (1, 1, 8, 8)


class Shuffle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(1, 8, 3, padding=1), nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = F.relu(self.a(x))
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        return self.b(y)


class Tokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.fc = nn.Conv2d(1, 8, 3, padding=1), nn.Linear(8, 6)

    def forward(self, x):
        t = self.a(x).flatten(2).transpose(1, 2)  # [N, HW, C]
        return self.fc(t)


class SqueezeUnsqueeze(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(1, 8, 3, padding=1), nn.Conv2d(1, 4, 1)

    def forward(self, x):
        y = self.a(x)[:, :1].squeeze(1)             # [N, H, W]
        return self.b(torch.relu(y).unsqueeze(1))   # back to [N, 1, H, W]


def _names(model) -> list[str]:
    return [name for name, _ in ops_of(model.data)]


def test_channel_shuffle_is_one_transpose_in_nhwc(tmp_path):
    model = check(build(Shuffle(), SHAPE, tmp_path), "Transpose")
    names = _names(model)
    assert model.float_ops == [] and names.count("TRANSPOSE") == 1, names
    assert model.outputs[0]["layout"] == "NHWC"


def test_token_flatten_and_transpose_cost_no_transpose(tmp_path):
    model = check(build(Tokens(), SHAPE, tmp_path, "int8"), "Transpose")
    assert model.float_ops == [] and "TRANSPOSE" not in _names(model), _names(model)


def test_squeeze_unsqueeze_are_int8_reshapes(tmp_path):
    model = check(build(SqueezeUnsqueeze(), SHAPE, tmp_path), "Squeeze")
    assert model.float_ops == [] and "TRANSPOSE" not in _names(model), _names(model)
    assert "Unsqueeze" not in {o["op_type"] for o in model.float_ops}
