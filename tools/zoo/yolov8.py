"""A YOLOv8n-style detector (after the ultralytics v8 design, "n" scale: depth 0.33, width 0.25):
Conv(BN, SiLU) stem, C2f blocks (split, a chain of bottlenecks, concat of every stage), SPPF
(three chained 5x5 max pools), a PAN neck, and the anchor-free decoupled head with DFL
(softmax over 16 distance bins, expectation by a fixed 1x1 conv). The exported output is the
packed ``[1, 4 + nc, anchors]`` tensor: xywh boxes in pixels (0..input size) stacked on class
probabilities (0..1), exactly the packing that one int8 scale cannot hold (issue 14).

Anchors are rebuilt from the feature-map shapes on every call, as in ultralytics' export, so a
TorchScript export with dynamic H/W carries the Shape/Range/Expand subgraphs real YOLO files do.
Random weights, seeded; biases initialised as ultralytics does (box 1.0, class log-prior).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .common import seeded

if TYPE_CHECKING:
    from torch import nn

STRIDES = (8, 16, 32)
REG_MAX = 16  # DFL distance bins per box side


def yolov8n(num_classes: int = 80, seed: int = 0) -> nn.Module:
    """~3.2M params at 80 classes; input [1,3,H,W] (H, W multiples of 32; 320 here, 640 in the
    reference) -> [1, 4+num_classes, H*W/64 + H*W/256 + H*W/1024]."""
    import torch
    from torch import nn

    class Conv(nn.Module):
        def __init__(self, cin: int, cout: int, k: int = 1, s: int = 1) -> None:
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
            self.bn = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.03)
            self.act = nn.SiLU(inplace=True)

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Bottleneck(nn.Module):
        def __init__(self, c: int, shortcut: bool) -> None:
            super().__init__()
            self.cv1, self.cv2 = Conv(c, c, 3), Conv(c, c, 3)
            self.add = shortcut

        def forward(self, x):
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C2f(nn.Module):
        def __init__(self, cin: int, cout: int, n: int, shortcut: bool) -> None:
            super().__init__()
            self.c = cout // 2
            self.cv1 = Conv(cin, 2 * self.c, 1)
            self.cv2 = Conv((2 + n) * self.c, cout, 1)
            self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

        def forward(self, x):
            y = list(self.cv1(x).chunk(2, 1))
            y.extend(m(y[-1]) for m in self.m)
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, cin: int, cout: int, k: int = 5) -> None:
            super().__init__()
            hidden = cin // 2
            self.cv1, self.cv2 = Conv(cin, hidden, 1), Conv(hidden * 4, cout, 1)
            self.m = nn.MaxPool2d(k, 1, k // 2)

        def forward(self, x):
            y = [self.cv1(x)]
            y.extend(self.m(y[-1]) for _ in range(3))
            return self.cv2(torch.cat(y, 1))

    class DFL(nn.Module):
        """Expected distance from a softmax over REG_MAX bins: a frozen 1x1 conv of 0..15."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(REG_MAX, 1, 1, bias=False).requires_grad_(False)
            self.conv.weight.data[:] = torch.arange(REG_MAX, dtype=torch.float).view(
                1, REG_MAX, 1, 1)

        def forward(self, x):
            b, _, a = x.shape
            return self.conv(x.view(b, 4, REG_MAX, a).transpose(2, 1).softmax(1)).view(b, 4, a)

    def make_anchors(feats: list, offset: float = 0.5):
        points, strides = [], []
        for f, stride in zip(feats, STRIDES, strict=True):
            h, w = f.shape[2:]
            sx = torch.arange(w, dtype=f.dtype) + offset
            sy = torch.arange(h, dtype=f.dtype) + offset
            sy, sx = torch.meshgrid(sy, sx, indexing="ij")
            points.append(torch.stack((sx, sy), -1).view(-1, 2))
            strides.append(torch.full((h * w, 1), float(stride), dtype=f.dtype))
        return torch.cat(points).transpose(0, 1), torch.cat(strides).transpose(0, 1)

    class Detect(nn.Module):
        def __init__(self, nc: int, ch: tuple[int, ...]) -> None:
            super().__init__()
            self.nc, self.no = nc, nc + 4 * REG_MAX
            c2, c3 = max(16, ch[0] // 4, 4 * REG_MAX), max(ch[0], min(nc, 100))
            self.cv2 = nn.ModuleList(
                nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * REG_MAX, 1))
                for x in ch)
            self.cv3 = nn.ModuleList(
                nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for x in ch)
            self.dfl = DFL()

        def bias_init(self) -> None:
            for box, cls, s in zip(self.cv2, self.cv3, STRIDES, strict=True):
                box[-1].bias.data[:] = 1.0
                cls[-1].bias.data[: self.nc] = math.log(5 / self.nc / (640 / s) ** 2)

        def forward(self, xs: list):
            xs = [torch.cat((b(x), c(x)), 1) for x, b, c in zip(xs, self.cv2, self.cv3,
                                                                  strict=True)]
            anchors, strides = make_anchors(xs)
            b = xs[0].shape[0]
            flat = torch.cat([x.view(b, self.no, -1) for x in xs], 2)
            box, cls = flat.split((4 * REG_MAX, self.nc), 1)
            lt, rb = self.dfl(box).chunk(2, 1)
            x1y1, x2y2 = anchors.unsqueeze(0) - lt, anchors.unsqueeze(0) + rb
            xywh = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * strides
            return torch.cat((xywh, cls.sigmoid()), 1)

    class YOLOv8n(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # backbone: channels 64..1024 x 0.25, C2f repeats 3/6/6/3 x 0.33
            self.b0, self.b1, self.b2 = Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C2f(32, 32, 1, True)
            self.b3, self.b4 = Conv(32, 64, 3, 2), C2f(64, 64, 2, True)
            self.b5, self.b6 = Conv(64, 128, 3, 2), C2f(128, 128, 2, True)
            self.b7, self.b8 = Conv(128, 256, 3, 2), C2f(256, 256, 1, True)
            self.sppf = SPPF(256, 256)
            self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
            self.h12, self.h15 = C2f(384, 128, 1, False), C2f(192, 64, 1, False)
            self.h16, self.h18 = Conv(64, 64, 3, 2), C2f(192, 128, 1, False)
            self.h19, self.h21 = Conv(128, 128, 3, 2), C2f(384, 256, 1, False)
            self.detect = Detect(num_classes, (64, 128, 256))
            self.detect.bias_init()

        def forward(self, x):
            p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
            p4 = self.b6(self.b5(p3))
            p5 = self.sppf(self.b8(self.b7(p4)))
            n4 = self.h12(torch.cat((self.up(p5), p4), 1))
            out3 = self.h15(torch.cat((self.up(n4), p3), 1))
            out4 = self.h18(torch.cat((self.h16(out3), n4), 1))
            out5 = self.h21(torch.cat((self.h19(out4), p5), 1))
            return self.detect([out3, out4, out5])

    return seeded(YOLOv8n, seed)
