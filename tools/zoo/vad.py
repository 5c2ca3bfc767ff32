"""A voice-activity detector shaped like Silero VAD v5: one 512-sample chunk at 16 kHz per call,
an STFT written as a Conv1d with a fixed Fourier basis (reflect-padded), a magnitude, four
Conv1d+ReLU encoder blocks that reduce time to one step, an LSTM cell carried across calls in a
``state`` input ``[2, N, 128]`` (h and c; batch on axis 1), and a Conv1d+Sigmoid speech
probability. The int64 scalar ``sr`` selects the 16 kHz or the 8 kHz front end through an ONNX
``If`` (torch.cond), as Silero's export branches on it.

Inputs: input float [N, 512], sr int64 [], state float [2, N, 128]. Outputs: prob [N, 1],
stateN [2, N, 128]. Random weights, seeded (the Fourier bases are fixed, not random).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .common import seeded

if TYPE_CHECKING:
    import torch
    from torch import nn

CHUNK = 512  # samples per call at 16 kHz
HIDDEN = 128  # LSTM state width


def fourier_basis(n_fft: int, hop: int) -> torch.Tensor:
    """[2*(n_fft//2+1), 1, n_fft] Hann-windowed cos/sin rows: the STFT as a strided Conv1d."""
    import torch

    bins = n_fft // 2 + 1
    t = torch.arange(n_fft, dtype=torch.float64)
    window = 0.5 - 0.5 * torch.cos(2 * math.pi * t / n_fft)
    freqs = torch.arange(bins, dtype=torch.float64)[:, None]
    angle = 2 * math.pi * freqs * t[None] / n_fft
    basis = torch.cat((torch.cos(angle), -torch.sin(angle))) * window
    return basis.float()[:, None, :]


def silero_like_vad(seed: int = 0) -> nn.Module:
    """~0.3M params; see the module docstring for the I/O."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class STFT(nn.Module):
        def __init__(self, n_fft: int, hop: int, pad: int) -> None:
            super().__init__()
            self.register_buffer("basis", fourier_basis(n_fft, hop))
            self.hop, self.pad, self.bins = hop, pad, n_fft // 2 + 1

        def forward(self, x):
            x = F.pad(x[:, None, :], (0, self.pad), mode="reflect")
            spec = F.conv1d(x, self.basis, stride=self.hop)
            re, im = spec[:, : self.bins], spec[:, self.bins:]
            return torch.sqrt(re * re + im * im)

    class VAD(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stft16 = STFT(256, 128, 64)
            # 8 kHz: the same 129 bins over a window twice as long in time, same frame count
            self.stft8 = STFT(256, 128, 64)
            self.stft8.basis.mul_(0.5)
            chans = [(129, 128, 1), (128, 64, 2), (64, 64, 2), (64, 128, 1)]
            self.encoder = nn.Sequential(*[m for cin, cout, s in chans for m in (
                nn.Conv1d(cin, cout, 3, s, 1), nn.ReLU())])
            self.cell = nn.LSTMCell(HIDDEN, HIDDEN)
            self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(HIDDEN, 1, 1), nn.Sigmoid())

        def forward(self, x, sr, state):
            feats = torch.cond(sr == 16000, lambda v: self.stft16(v), lambda v: self.stft8(v),
                               (x,))
            z = self.encoder(feats)[..., 0]  # time reduced to one step: [N, 128]
            h, c = self.cell(z, (state[0], state[1]))
            prob = self.out(h[..., None])[..., 0]
            return prob, torch.stack((h, c))

    return seeded(VAD, seed)
