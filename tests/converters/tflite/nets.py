"""Small random-weight PyTorch nets for the writer tests (shapes and op coverage only; the
real-data check is the digits CNN)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn


class EveryOp(nn.Module):
    """Conv, depthwise and grouped conv, ReLU, ReLU6, sigmoid, hardswish, max/avg pool, pad,
    nearest and bilinear resize, channel concat, add, mul, transpose, flatten, linear,
    matmul, global average pool and softmax, in one graph with two outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(16, 32, 3, padding=1, groups=16)  # depthwise, multiplier 2
        self.grouped = nn.Conv2d(32, 32, 3, padding=1, groups=4)
        self.pw = nn.Conv2d(32, 16, 1)
        self.side = nn.Conv2d(16, 16, 3, padding=0)
        self.up = nn.Conv2d(32, 8, 1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 32)
        self.proj = nn.Parameter(torch.randn(32, 10))

    def forward(self, x):
        x = F.relu(self.stem(x))                       # 16x16x16
        y = F.relu6(self.dw(x))                        # 32 ch
        y = F.hardswish(self.grouped(y))
        y = self.pw(y) * torch.sigmoid(y.mean(dim=(2, 3), keepdim=True))[:, :16]
        z = F.max_pool2d(x, 2)                         # 8x8
        z = F.pad(z, (1, 1, 1, 1), mode="reflect")     # 10x10, cannot fold into the conv
        z = self.side(z.transpose(2, 3))               # 8x8, H and W swapped: a TRANSPOSE
        z = F.interpolate(z, scale_factor=2, mode="nearest")  # 16x16
        y = torch.cat([y + z, z], dim=1)               # 32 ch, channel concat
        y = F.interpolate(y, size=(8, 8), mode="bilinear", align_corners=False)
        y = F.avg_pool2d(self.up(y), 2)                # 8 ch, 4x4
        t = y.permute(0, 2, 3, 1)                      # transpose to NHWC in ONNX
        pooled = self.gap(t.permute(0, 3, 1, 2)).flatten(1)
        feats = F.relu(self.fc(pooled))
        # a small logit range keeps softmax from turning one input step into several
        logits = (feats @ self.proj) * 0.1
        return torch.softmax(logits, dim=-1), y


class MoreOps(nn.Module):
    """The rest: LeakyRelu, Tanh and Sub (float in onnxruntime, so float fallback here),
    a general Clip, ceil-mode max pool, average pool excluding padding, global max pool,
    ReduceMax, a rank-3 linear layer, a matmul of two activations, Split, Squeeze and
    Unsqueeze; three outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 6)

    def forward(self, x):
        a = self.a(x)
        c = torch.clamp(self.b(F.leaky_relu(a, 0.1) - torch.tanh(a)), -1.5, 2.5)
        p = F.max_pool2d(c, 3, stride=2, ceil_mode=True)
        q = F.avg_pool2d(c, 3, stride=2, padding=1, count_include_pad=False)
        r = F.adaptive_max_pool2d(p, 1) + q.amax(dim=(2, 3), keepdim=True)
        t = self.fc(c.flatten(2).transpose(1, 2))  # [N, HW, 6]
        att = torch.softmax(t @ t.transpose(1, 2) * 0.1, dim=-1)
        u, v = torch.split(c, [3, 5], dim=1)
        return r.squeeze(-1).squeeze(-1), att, torch.cat([v, u], 1).unsqueeze(1).squeeze(1)


class LayoutNet(nn.Module):
    """The layout cases one by one: flatten before FC, concat on channels, pad, resize."""

    def __init__(self, case: str) -> None:
        super().__init__()
        self.case = case
        self.a = nn.Conv2d(4, 8, 3, padding=1)
        self.b = nn.Conv2d(4, 6, 1)
        self.fc = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        a = F.relu(self.a(x))
        if self.case == "flatten_fc":
            return self.fc(a.flatten(1))
        if self.case == "concat":
            return torch.cat([a, F.relu(self.b(x))], dim=1)
        if self.case == "pad":
            return F.max_pool2d(F.pad(a, (2, 1, 0, 3)), 3)
        if self.case == "resize_nearest":
            return F.interpolate(a, scale_factor=2, mode="nearest")
        if self.case == "resize_bilinear":
            return F.interpolate(a, size=(9, 9), mode="bilinear", align_corners=False)
        raise ValueError(self.case)


def seeded(module: nn.Module, seed: int = 0) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (1.0 / max(1, p[0].numel()) ** 0.5))
    return module.eval()


def export(module: nn.Module, shape: tuple[int, ...], path: Path, dynamo: bool = True,
           outputs: int = 1) -> Path:
    names = [f"out{i}" for i in range(outputs)]
    x = torch.randn(shape)
    if dynamo:
        torch.onnx.export(module, (x,), str(path), dynamo=True, input_names=["x"],
                          output_names=names, opset_version=18, external_data=False,
                          verbose=False)
    else:
        torch.onnx.export(module, (x,), str(path), dynamo=False, input_names=["x"],
                          output_names=names, opset_version=17)
    onnx.checker.check_model(str(path))
    return path


def inputs(shape: tuple[int, ...], count: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((count, *shape[1:])).astype(np.float32)}
