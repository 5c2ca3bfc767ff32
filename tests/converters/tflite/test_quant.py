"""Quantization rules LiteRT enforces: per-channel depthwise filters (quantized dimension 3),
int32 biases at input x weight scale, fixed softmax/logistic output scales (softmax on int16
when the graph wants another scale)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from .helpers import ops_of, parity, tensor


class Depthwise(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pw = nn.Conv2d(3, 6, 1)
        self.dw = nn.Conv2d(6, 12, 3, stride=2, padding=1, groups=6)  # multiplier 2

    def forward(self, x):
        return self.dw(F.relu(self.pw(x)))


class Heads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        h = torch.sigmoid(self.conv(x)).mean(dim=(2, 3))
        return torch.softmax(self.fc(h) * 0.3, dim=-1)


def test_depthwise_filters_are_per_channel_on_axis_3(qdq_models):
    shape = (1, 3, 12, 12)
    model, within, _ = parity(qdq_models("depthwise", Depthwise(), shape),
                              {"x": np.random.default_rng(4).standard_normal(
                                  (16, *shape[1:])).astype(np.float32)})
    assert within[0] >= 0.99
    (dw,) = [op for name, op in ops_of(model.data) if name == "DEPTHWISE_CONV_2D"]
    assert dw.builtinOptions.depthMultiplier == 2
    x_t, w_t, b_t = (tensor(model.data, i) for i in dw.inputs)
    assert list(w_t.shape) == [1, 3, 3, 12]
    q = w_t.quantization
    assert q.quantizedDimension == 3 and len(q.scale) == 12 and not any(q.zeroPoint)
    assert len(set(np.round(q.scale, 9))) > 1, "expected distinct per-channel scales"
    # bias: int32, scale = input scale x weight scale per channel, as LiteRT checks
    assert b_t.type == 2 and b_t.quantization.quantizedDimension == 0  # TensorType.INT32
    want = np.float32(x_t.quantization.scale[0]) * np.asarray(q.scale, np.float32)
    np.testing.assert_allclose(b_t.quantization.scale, want, rtol=1e-6)


def test_softmax_and_logistic_write_fixed_scales_then_requantize(qdq_models):
    shape = (1, 3, 8, 8)
    model, within, _ = parity(qdq_models("heads", Heads(), shape),
                              {"x": np.random.default_rng(5).standard_normal(
                                  (32, *shape[1:])).astype(np.float32)})
    assert within[0] >= 0.99
    ops = ops_of(model.data)
    names = [name for name, _ in ops]
    # LOGISTIC on a 4-D map: the int8 kernel at its fixed 1/256 scale
    (op,) = [op for name, op in ops if name == "LOGISTIC"]
    out = tensor(model.data, op.outputs[0]).quantization
    assert np.isclose(out.scale[0], 1 / 256) and out.zeroPoint[0] == -128
    # onnxruntime's softmax output is uint8 scale 1/255, not the int8 kernel's 1/256: SOFTMAX
    # runs on int16 (output 1/32768) between two QUANTIZEs, so it rounds once, as onnxruntime
    (op,) = [op for name, op in ops if name == "SOFTMAX"]
    out = tensor(model.data, op.outputs[0]).quantization
    assert np.isclose(out.scale[0], 1 / 32768) and out.zeroPoint[0] == 0
    at = names.index("SOFTMAX")
    assert names[at - 1] == "QUANTIZE" and names[at + 1] == "QUANTIZE", names
    (info,) = model.outputs
    assert np.isclose(info["quantization"]["scale"], 1 / 255, rtol=1e-4)
    assert info["quantization"]["zero_point"] == -128
