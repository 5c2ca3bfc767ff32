"""MTCNN's PNet (Zhang et al. 2016, "Joint Face Detection and Alignment using Multi-task
Cascaded Convolutional Networks") with its REAL trained weights, read from the facenet-pytorch
wheel's ``data/pnet.pt`` (installed with ``pip install --no-deps facenet-pytorch``; its package
imports torchvision, so the file is located without importing it). Fully convolutional: 3x3
convs with per-channel PReLU, a ceil-mode max pool, and two 1x1 heads: box regression [N,4,h,w]
and face probability (Softmax over 2 channels) [N,2,h,w]; dynamic H/W (the image pyramid)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

INSTALL_HINT = "pip install --no-deps facenet-pytorch"


def facenet_weights(net: str = "pnet") -> Path:
    """Path of facenet-pytorch's trained ``<net>.pt`` state dict, without importing it."""
    spec = importlib.util.find_spec("facenet_pytorch")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"expected the facenet-pytorch wheel for MTCNN's trained "
                                f"weights, got none installed ({INSTALL_HINT})")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{net}.pt"
    if not path.is_file():
        raise FileNotFoundError(f"expected {path} in the facenet-pytorch wheel, got no file")
    return path


def mtcnn_pnet() -> nn.Module:
    """~6.6k params, trained; input [N,3,H,W] (RGB scaled to about [-1,1]) -> (boxes, probs)."""
    import torch
    from torch import nn

    class PNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.prelu1 = nn.Conv2d(3, 10, 3), nn.PReLU(10)
            self.pool1 = nn.MaxPool2d(2, 2, ceil_mode=True)
            self.conv2, self.prelu2 = nn.Conv2d(10, 16, 3), nn.PReLU(16)
            self.conv3, self.prelu3 = nn.Conv2d(16, 32, 3), nn.PReLU(32)
            self.conv4_1, self.softmax4_1 = nn.Conv2d(32, 2, 1), nn.Softmax(dim=1)
            self.conv4_2 = nn.Conv2d(32, 4, 1)

        def forward(self, x):
            x = self.pool1(self.prelu1(self.conv1(x)))
            x = self.prelu3(self.conv3(self.prelu2(self.conv2(x))))
            return self.conv4_2(x), self.softmax4_1(self.conv4_1(x))

    net = PNet()
    net.load_state_dict(torch.load(facenet_weights("pnet"), weights_only=True))
    return net.eval()
