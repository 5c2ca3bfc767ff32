"""A 1-D audio CNN whose ``forward`` reshapes its input: a CREPE-style pitch tracker (Kim et al.
2018, "CREPE: A Convolutional Representation for Pitch Estimation"), "tiny" capacity as in
torchcrepe. A [N, 1024] frame of 16 kHz audio becomes ``x[:, None, :, None]`` ([N,1,1024,1]),
then six conv(k x 1)-ReLU-BatchNorm-maxpool(2x1) layers (the BatchNorm follows the ReLU, so it
cannot fold into the conv), and a Linear+Sigmoid over 360 pitch bins (20-cent steps).
Random weights, seeded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import seeded, trained_like_init

if TYPE_CHECKING:
    from torch import nn

FRAME = 1024
PITCH_BINS = 360
CHANNELS = (128, 16, 16, 16, 32, 64)  # "tiny": capacity 4 of the full model's (1024, 128, ...)


def crepe_tiny(seed: int = 0) -> nn.Module:
    """~0.49M params; input [N,1024] float -> pitch-bin activations [N,360]."""
    from torch import nn
    from torch.nn import functional as F

    class Layer(nn.Module):
        def __init__(self, cin: int, cout: int, k: int, stride: int, pad: tuple[int, int]):
            super().__init__()
            self.pad = pad
            self.conv = nn.Conv2d(cin, cout, (k, 1), (stride, 1))
            self.bn = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.0)
            self.pool = nn.MaxPool2d((2, 1), (2, 1))

        def forward(self, x):
            x = F.pad(x, (0, 0, *self.pad))
            return self.pool(self.bn(F.relu(self.conv(x))))

    class Crepe(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            ins = (1, *CHANNELS[:-1])
            self.layers = nn.Sequential(
                Layer(ins[0], CHANNELS[0], 512, 4, (254, 254)),
                *[Layer(ins[i], CHANNELS[i], 64, 1, (31, 32)) for i in range(1, 6)])
            self.classifier = nn.Linear(CHANNELS[-1] * 4, PITCH_BINS)
            trained_like_init(self)
            nn.init.normal_(self.classifier.weight, 0, 0.05)

        def forward(self, x):
            x = self.layers(x[:, None, :, None])  # [N,1,1024,1] -> [N,64,4,1]
            return self.classifier(x.permute(0, 2, 1, 3).reshape(x.shape[0], -1)).sigmoid()

    return seeded(Crepe, seed)
