"""MobileNetV3-Small and -Large (Howard et al. 2019, "Searching for MobileNetV3", Tables 1-2):
inverted residuals with 3x3/5x5 depthwise convs, squeeze-excite gated by HardSigmoid, HardSwish
in the later stages and the head. Random weights, seeded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import conv_bn_act, make_divisible, seeded, trained_like_init

if TYPE_CHECKING:
    from torch import nn

# (kernel, expansion channels, out channels, squeeze-excite, activation "RE"/"HS", stride)
LARGE = [(3, 16, 16, False, "RE", 1), (3, 64, 24, False, "RE", 2), (3, 72, 24, False, "RE", 1),
         (5, 72, 40, True, "RE", 2), (5, 120, 40, True, "RE", 1), (5, 120, 40, True, "RE", 1),
         (3, 240, 80, False, "HS", 2), (3, 200, 80, False, "HS", 1),
         (3, 184, 80, False, "HS", 1), (3, 184, 80, False, "HS", 1),
         (3, 480, 112, True, "HS", 1), (3, 672, 112, True, "HS", 1),
         (5, 672, 160, True, "HS", 2), (5, 960, 160, True, "HS", 1),
         (5, 960, 160, True, "HS", 1)]
SMALL = [(3, 16, 16, True, "RE", 2), (3, 72, 24, False, "RE", 2), (3, 88, 24, False, "RE", 1),
         (5, 96, 40, True, "HS", 2), (5, 240, 40, True, "HS", 1), (5, 240, 40, True, "HS", 1),
         (5, 120, 48, True, "HS", 1), (5, 144, 48, True, "HS", 1), (5, 288, 96, True, "HS", 2),
         (5, 576, 96, True, "HS", 1), (5, 576, 96, True, "HS", 1)]


def mobilenetv3(variant: str = "small", num_classes: int = 1000, width: float = 1.0,
                seed: int = 0) -> nn.Module:
    """MobileNetV3-``variant`` ("small": ~2.5M params, "large": ~5.5M at width 1.0, 1000
    classes); input [1,3,224,224] -> [1,num_classes]."""
    from torch import nn

    if variant not in ("small", "large"):
        raise ValueError(f"expected variant 'small' or 'large', got {variant!r}")
    table = SMALL if variant == "small" else LARGE
    last_conv, head = (576, 1024) if variant == "small" else (960, 1280)

    class SqueezeExcite(nn.Module):
        def __init__(self, ch: int) -> None:
            super().__init__()
            mid = make_divisible(ch // 4)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc1, self.fc2 = nn.Conv2d(ch, mid, 1), nn.Conv2d(mid, ch, 1)
            self.relu, self.gate = nn.ReLU(inplace=True), nn.Hardsigmoid(inplace=True)

        def forward(self, x):
            return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))

    class Bneck(nn.Module):
        def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, nl: str,
                     stride: int) -> None:
            super().__init__()
            act = nn.Hardswish if nl == "HS" else nn.ReLU
            self.use_res = stride == 1 and cin == cout
            layers: list[nn.Module] = []
            if exp != cin:
                layers.append(conv_bn_act(cin, exp, 1, act=act))
            layers.append(conv_bn_act(exp, exp, k, stride, groups=exp, act=act))
            if se:
                layers.append(SqueezeExcite(exp))
            layers.append(conv_bn_act(exp, cout, 1))  # linear projection
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.block(x) if self.use_res else self.block(x)

    class MobileNetV3(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            cin = make_divisible(16 * width)
            layers: list[nn.Module] = [conv_bn_act(3, cin, 3, 2, act=nn.Hardswish)]
            for k, exp, cout, se, nl, s in table:
                exp, cout = make_divisible(exp * width), make_divisible(cout * width)
                layers.append(Bneck(cin, k, exp, cout, se, nl, s))
                cin = cout
            last = make_divisible(last_conv * width)
            layers.append(conv_bn_act(cin, last, 1, act=nn.Hardswish))
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Linear(last, head), nn.Hardswish(inplace=True),
                                            nn.Dropout(0.2), nn.Linear(head, num_classes))
            trained_like_init(self)

        def forward(self, x):
            return self.classifier(self.pool(self.features(x)).flatten(1))

    return seeded(MobileNetV3, seed)


def mobilenetv3_small(seed: int = 0) -> nn.Module:
    return mobilenetv3("small", seed=seed)


def mobilenetv3_large(seed: int = 0) -> nn.Module:
    return mobilenetv3("large", seed=seed)
