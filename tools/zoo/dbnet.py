"""A DBNet-style text detector (Liao et al. 2020, "Real-time Scene Text Detection with
Differentiable Binarization", as shipped in PaddleOCR's mobile det models): a light
MobileNet-like backbone giving 1/4..1/32 features, the DB FPN (1x1 lateral convs, nearest 2x
top-down adds, 3x3 smoothing, everything resized to 1/4 and concatenated), and the DB
probability head: 3x3 conv-BN-ReLU, ConvTranspose 2x-BN-ReLU, ConvTranspose 2x, Sigmoid.
The head's BatchNorms follow transposed convs: nothing to fold them into. Output [N,1,H,W].
Random weights, seeded; reduced widths (backbone 16..96 channels, FPN 96)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import conv_bn_act, seeded, trained_like_init

if TYPE_CHECKING:
    from torch import nn

# (channels, stride) of the four backbone stages feeding the FPN: 1/4, 1/8, 1/16, 1/32
STAGES = ((24, 2), (40, 2), (80, 2), (96, 2))
INNER = 96  # FPN inner channels (PaddleOCR's mobile det: 96)


def dbnet(seed: int = 0) -> nn.Module:
    """~0.2M params; input [1,3,H,W] (H, W multiples of 32) -> text probability [1,1,H,W]."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    def separable(cin: int, cout: int, stride: int) -> nn.Sequential:
        return nn.Sequential(conv_bn_act(cin, cin, 3, stride, groups=cin, act=nn.Hardswish),
                             conv_bn_act(cin, cout, 1, act=nn.Hardswish))

    class DBNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = conv_bn_act(3, 16, 3, 2, act=nn.Hardswish)  # 1/2
            stages, cin = [], 16
            for cout, stride in STAGES:
                stages.append(nn.Sequential(separable(cin, cout, stride),
                                            separable(cout, cout, 1)))
                cin = cout
            self.stages = nn.ModuleList(stages)
            self.lateral = nn.ModuleList(nn.Conv2d(c, INNER, 1, bias=False) for c, _ in STAGES)
            self.smooth = nn.ModuleList(nn.Conv2d(INNER, INNER // 4, 3, padding=1, bias=False)
                                        for _ in STAGES)
            q = INNER // 4
            self.head = nn.Sequential(
                conv_bn_act(INNER, q, 3, act=nn.ReLU),
                nn.ConvTranspose2d(q, q, 2, 2), nn.BatchNorm2d(q), nn.ReLU(inplace=True),
                nn.ConvTranspose2d(q, 1, 2, 2), nn.Sigmoid(),
            )
            trained_like_init(self)

        def forward(self, x):
            feats, y = [], self.stem(x)
            for stage in self.stages:
                y = stage(y)
                feats.append(y)
            lat = [conv(f) for conv, f in zip(self.lateral, feats, strict=True)]
            for i in range(len(lat) - 2, -1, -1):  # top-down: 1/32 -> 1/4
                lat[i] = lat[i] + F.interpolate(lat[i + 1], scale_factor=2.0, mode="nearest")
            outs = [conv(t) for conv, t in zip(self.smooth, lat, strict=True)]
            fused = torch.cat([F.interpolate(o, scale_factor=float(2 ** i), mode="nearest")
                               if i else o for i, o in enumerate(outs)][::-1], 1)
            return self.head(fused)

    return seeded(DBNet, seed)
