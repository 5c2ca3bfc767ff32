"""SqueezeNet 1.1 (Iandola et al. 2016; v1.1 from the authors' repository): Fire modules
(1x1 squeeze, then parallel 1x1 and 3x3 expands concatenated), ceil-mode max pools, and a
conv classifier with global average pooling. Random weights, seeded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import seeded, trained_like_init

if TYPE_CHECKING:
    from torch import nn


def squeezenet(num_classes: int = 1000, seed: int = 0) -> nn.Module:
    """~1.2M params at 1000 classes; input [1,3,224,224] -> [1,num_classes]."""
    import torch
    from torch import nn

    class Fire(nn.Module):
        def __init__(self, cin: int, squeeze: int, e1: int, e3: int) -> None:
            super().__init__()
            self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU(inplace=True))
            self.e1 = nn.Sequential(nn.Conv2d(squeeze, e1, 1), nn.ReLU(inplace=True))
            self.e3 = nn.Sequential(nn.Conv2d(squeeze, e3, 3, padding=1), nn.ReLU(inplace=True))

        def forward(self, x):
            s = self.squeeze(x)
            return torch.cat((self.e1(s), self.e3(s)), dim=1)

    def pool() -> nn.Module:
        return nn.MaxPool2d(3, 2, ceil_mode=True)

    class SqueezeNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 64, 3, 2), nn.ReLU(inplace=True), pool(),
                Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), pool(),
                Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(),
                Fire(256, 48, 192, 192), Fire(384, 48, 192, 192),
                Fire(384, 64, 256, 256), Fire(512, 64, 256, 256),
            )
            self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(512, num_classes, 1),
                                            nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1))
            trained_like_init(self)
            # the classifier conv is fan-in scaled in the reference; fan-out keeps it in range too
            nn.init.normal_(self.classifier[1].weight, 0, 0.01)

        def forward(self, x):
            return self.classifier(self.features(x)).flatten(1)

    return seeded(SqueezeNet, seed)
