"""A CRNN/CTC text-line recognizer (Shi et al. 2016, "An End-to-End Trainable Neural Network for
Image-based Sequence Recognition"): a VGG-style conv stack that pools height to 1 and width by
4, a two-layer bidirectional LSTM over the width, a LayerNorm, and a per-step softmax over the
CTC alphabet (blank = 0). The LayerNorm is written out as mean/sub/pow/sqrt/div, the form the
issue's real recognizer export carried. Output [N, T, classes] with T = W/4 + 1, dynamic W.
Random weights, seeded; channels reduced 4x from the paper (16..128), hidden 64."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import seeded, trained_like_init

if TYPE_CHECKING:
    from torch import nn

NUM_CLASSES = 97  # blank + 96 printable characters (PaddleOCR's English dictionary size)


def crnn(num_classes: int = NUM_CLASSES, hidden: int = 64, seed: int = 0) -> nn.Module:
    """~0.5M params; input [N,3,32,W] -> character probabilities [N, W/4 + 1, num_classes]."""
    import torch
    from torch import nn

    def conv(cin: int, cout: int, bn: bool = False, k: int = 3, pad: int = 1) -> list:
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, 1, pad, bias=not bn)]
        if bn:
            layers.append(nn.BatchNorm2d(cout))
        return layers + [nn.ReLU(inplace=True)]

    class DecomposedLayerNorm(nn.Module):
        def __init__(self, dim: int, eps: float = 1e-5) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.bias = nn.Parameter(torch.zeros(dim))
            self.eps = eps

        def forward(self, x):
            centred = x - x.mean(-1, keepdim=True)
            var = centred.pow(2).mean(-1, keepdim=True)
            return centred / torch.sqrt(var + self.eps) * self.weight + self.bias

    class CRNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = nn.Sequential(
                *conv(3, 16), nn.MaxPool2d(2, 2),                      # 16 x W/2
                *conv(16, 32), nn.MaxPool2d(2, 2),                     # 8 x W/4
                *conv(32, 64, bn=True), *conv(64, 64),
                nn.MaxPool2d((2, 2), (2, 1), (0, 1)),                  # 4 x W/4+1
                *conv(64, 128, bn=True), *conv(128, 128),
                nn.MaxPool2d((2, 2), (2, 1), (0, 1)),                  # 2 x W/4+2
                *conv(128, 128, bn=True, k=2, pad=0),                  # 1 x W/4+1
            )
            self.rnn = nn.LSTM(128, hidden, num_layers=2, bidirectional=True, batch_first=True)
            self.norm = DecomposedLayerNorm(2 * hidden)
            self.fc = nn.Linear(2 * hidden, num_classes)
            trained_like_init(self)
            nn.init.normal_(self.fc.weight, 0, 0.1)  # peaky per-step posteriors, like CTC's

        def forward(self, x):
            seq = self.cnn(x).squeeze(2).permute(0, 2, 1)  # [N, T, C]
            out, _ = self.rnn(seq)
            return self.fc(self.norm(out)).softmax(-1)

    return seeded(CRNN, seed)
