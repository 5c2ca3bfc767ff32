"""The zoo's first three models: a MobileNetV2-size classifier, a plain VGG-ish CNN and a small
pre-norm transformer encoder (random weights, seeded: shape and speed only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import make_divisible, seeded

if TYPE_CHECKING:
    from torch import nn


def mobilenetv2_like(num_classes: int = 1000, width: float = 1.0, seed: int = 0) -> nn.Module:
    """MobileNetV2 topology (Sandler et al. 2018): inverted residuals, depthwise 3x3, ReLU6, BN.

    width=1.0, 1000 classes: ~3.5M params; input [1,3,224,224] -> [1,num_classes].
    """
    from torch import nn

    def conv_bn(cin: int, cout: int, k: int, stride: int, groups: int = 1, act: bool = True):
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
        ]
        if act:
            layers.append(nn.ReLU6(inplace=True))
        return nn.Sequential(*layers)

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
            super().__init__()
            hidden = cin * expand
            self.use_res = stride == 1 and cin == cout
            layers: list[nn.Module] = []
            if expand != 1:
                layers.append(conv_bn(cin, hidden, 1, 1))  # pointwise expand
            layers.append(conv_bn(hidden, hidden, 3, stride, groups=hidden))  # depthwise
            layers.append(conv_bn(hidden, cout, 1, 1, act=False))  # linear bottleneck
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res else self.conv(x)

    class MobileNetV2(nn.Module):
        # (expansion t, channels c, repeats n, first stride s) from the paper's Table 2
        SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

        def __init__(self) -> None:
            super().__init__()
            cin = make_divisible(32 * width)
            last = make_divisible(1280 * max(1.0, width))
            layers: list[nn.Module] = [conv_bn(3, cin, 3, 2)]
            for t, c, n, s in self.SETTINGS:
                cout = make_divisible(c * width)
                for i in range(n):
                    layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                    cin = cout
            layers.append(conv_bn(cin, last, 1, 1))
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, num_classes))

            # torchvision's MobileNetV2 initialisation: bell-shaped weights like trained ones
            # (PyTorch's default uniform init would make int8 weights look incompressible).
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out")
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.zeros_(m.bias)

        def forward(self, x):
            return self.classifier(self.pool(self.features(x)).flatten(1))

    return seeded(MobileNetV2, seed)


def plain_cnn(num_classes: int = 10, seed: int = 0) -> nn.Module:
    """VGG-ish: 5 stages of conv3x3+ReLU+maxpool (16..128 ch), then a linear head.

    Input [1,3,64,64] -> [1,num_classes]; ~0.26M params.
    """
    from torch import nn

    def build() -> nn.Module:
        layers: list[nn.Module] = []
        cin = 3
        for cout in (16, 32, 64, 128, 128):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
            cin = cout
        # 64 / 2**5 = 2 -> 128*2*2 features
        layers += [nn.Flatten(), nn.Linear(128 * 2 * 2, num_classes)]
        return nn.Sequential(*layers)

    return seeded(build, seed)


def transformer_block(dim: int = 64, heads: int = 4, depth: int = 2, seq: int = 16,
                      seed: int = 0) -> nn.Module:
    """Small pre-norm encoder on token embeddings: input [1,seq,dim] float -> [1,seq,dim].

    Token projection + learned positions, then ``depth`` x (LayerNorm, MultiheadAttention,
    residual, LayerNorm, GELU MLP 4x, residual), final LayerNorm. Defaults: ~105k params.
    """
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.ln2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(dim, dim)
            self.pos = nn.Parameter(0.02 * torch.randn(1, seq, dim))
            self.blocks = nn.Sequential(*[Block() for _ in range(depth)])
            self.norm = nn.LayerNorm(dim)

        def forward(self, tokens):
            return self.norm(self.blocks(self.embed(tokens) + self.pos))

    return seeded(Encoder, seed)
