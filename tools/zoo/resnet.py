"""ResNet18 (He et al. 2016, "Deep Residual Learning", Table 1): 7x7 stem, max pool, four
stages of two BasicBlocks (3x3-3x3 with identity or 1x1-projection shortcut), 64..512 channels.
Random weights, seeded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import conv_bn_act, seeded, trained_like_init

if TYPE_CHECKING:
    from torch import nn


def resnet18(num_classes: int = 1000, seed: int = 0) -> nn.Module:
    """~11.7M params at 1000 classes; input [1,3,224,224] -> [1,num_classes]."""
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(conv_bn_act(cin, cout, 3, stride, act=nn.ReLU),
                                      conv_bn_act(cout, cout, 3))
            self.short = (conv_bn_act(cin, cout, 1, stride) if stride != 1 or cin != cout
                          else nn.Identity())
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.body(x) + self.short(x))

    class ResNet18(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = [conv_bn_act(3, 64, 7, 2, act=nn.ReLU),
                                       nn.MaxPool2d(3, 2, 1)]
            cin = 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, num_classes)
            trained_like_init(self)

        def forward(self, x):
            return self.fc(self.pool(self.features(x)).flatten(1))

    return seeded(ResNet18, seed)
