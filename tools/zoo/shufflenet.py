"""ShuffleNetV2 1.0x (Ma et al. 2018, "ShuffleNet V2", Table 5): channel split, a
1x1-dw3x3-1x1 branch, concat and channel shuffle (reshape-transpose-reshape); stride-2 units run
both branches. Random weights, seeded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import conv_bn_act, seeded, trained_like_init

if TYPE_CHECKING:
    import torch
    from torch import nn

STAGES = ((4, 116), (8, 232), (4, 464))  # (repeats, out channels) at 1.0x


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)


def shufflenetv2(num_classes: int = 1000, seed: int = 0) -> nn.Module:
    """~2.3M params at 1000 classes; input [1,3,224,224] -> [1,num_classes]."""
    import torch
    from torch import nn

    class Unit(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.stride = stride
            half = cout // 2
            if stride == 2:
                self.branch1 = nn.Sequential(conv_bn_act(cin, cin, 3, 2, groups=cin),
                                             conv_bn_act(cin, half, 1, act=nn.ReLU))
            b2_in = cin if stride == 2 else half
            self.branch2 = nn.Sequential(conv_bn_act(b2_in, half, 1, act=nn.ReLU),
                                         conv_bn_act(half, half, 3, stride, groups=half),
                                         conv_bn_act(half, half, 1, act=nn.ReLU))

        def forward(self, x):
            if self.stride == 1:
                x1, x2 = x.chunk(2, dim=1)
                out = torch.cat((x1, self.branch2(x2)), dim=1)
            else:
                out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
            return channel_shuffle(out, 2)

    class ShuffleNetV2(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = [conv_bn_act(3, 24, 3, 2, act=nn.ReLU),
                                       nn.MaxPool2d(3, 2, 1)]
            cin = 24
            for repeats, cout in STAGES:
                layers += [Unit(cin, cout, 2)] + [Unit(cout, cout, 1) for _ in range(repeats - 1)]
                cin = cout
            layers.append(conv_bn_act(cin, 1024, 1, act=nn.ReLU))
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(1024, num_classes)
            trained_like_init(self)

        def forward(self, x):
            return self.fc(self.features(x).mean((2, 3)))

    return seeded(ShuffleNetV2, seed)
