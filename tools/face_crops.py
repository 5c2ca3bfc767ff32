"""MTCNN's ONet with its real trained weights, and real face / non-face crops to judge it on.

The ONet (the last MTCNN stage: a 48x48 crop -> face probability, box, 5 landmarks) is built
with facenet-pytorch's trained ``onet.pt`` (read through ``tools/zoo/mtcnn.facenet_weights``,
without importing the package, whose torchvision import would replace the pinned torch).
Two exact rewrites, outputs unchanged to float rounding:
- the face probability comes first: ``top1`` (the metric a build reads) scores the first output;
- facenet-pytorch flattens ``conv4``'s map as [N, W, H, C] (Caffe's layout); here the map is
  flattened as [N, C, H, W] and ``dense5``'s columns are permuted to match, so torch-pruning's
  channel -> flattened-feature mapping (channel-major) removes the right columns.

The crops are real photographs shipped in scikit-image's wheel (``pip install scikit-image``):
- faces: the 100 face crops of ``skimage.data.lfw_subset()`` (Labeled Faces in the Wild,
  25x25 grey), resized to 48x48 with small random shifts and zooms and mirrored;
- non-faces: the 100 non-face LFW crops, and random 48x48 windows of the wheel's photos of
  things (coffee, rocket, coins, bricks, grass, gravel, text, a clock, a horse, galaxies).
Faces split by source image: no face is in both the calibration and the held-out half.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SIZE = 48
SCENES = ("coffee", "rocket", "coins", "brick", "grass", "gravel", "text", "clock", "horse",
          "hubble_deep_field", "camera", "moon", "page")


def mtcnn_onet() -> Any:
    """ONet, input [N,3,48,48] RGB scaled to about [-1,1] -> (face probs [N,2], box [N,4],
    landmarks [N,10])."""
    import torch
    from torch import nn
    from zoo.mtcnn import facenet_weights

    class ONet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.prelu1 = nn.Conv2d(3, 32, 3), nn.PReLU(32)
            self.pool1 = nn.MaxPool2d(3, 2, ceil_mode=True)
            self.conv2, self.prelu2 = nn.Conv2d(32, 64, 3), nn.PReLU(64)
            self.pool2 = nn.MaxPool2d(3, 2, ceil_mode=True)
            self.conv3, self.prelu3 = nn.Conv2d(64, 64, 3), nn.PReLU(64)
            self.pool3 = nn.MaxPool2d(2, 2, ceil_mode=True)
            self.conv4, self.prelu4 = nn.Conv2d(64, 128, 2), nn.PReLU(128)
            self.dense5, self.prelu5 = nn.Linear(1152, 256), nn.PReLU(256)
            self.dense6_1, self.softmax6_1 = nn.Linear(256, 2), nn.Softmax(dim=1)
            self.dense6_2 = nn.Linear(256, 4)
            self.dense6_3 = nn.Linear(256, 10)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            x = self.pool1(self.prelu1(self.conv1(x)))
            x = self.pool2(self.prelu2(self.conv2(x)))
            x = self.pool3(self.prelu3(self.conv3(x)))
            x = self.prelu5(self.dense5(torch.flatten(self.prelu4(self.conv4(x)), 1)))
            return self.softmax6_1(self.dense6_1(x)), self.dense6_2(x), self.dense6_3(x)

    state = torch.load(facenet_weights("onet"), weights_only=True)
    # column (w, h, c) of the [N, W, H, C] flatten -> column (c, h, w) of [N, C, H, W]
    c, h, w = np.meshgrid(np.arange(128), np.arange(3), np.arange(3), indexing="ij")
    state["dense5.weight"] = state["dense5.weight"][:, torch.from_numpy(
        (w * 3 * 128 + h * 128 + c).reshape(-1))]
    net = ONet()
    net.load_state_dict(state)
    return net.eval()


def _resize(grey_or_rgb: np.ndarray) -> np.ndarray:
    from skimage.transform import resize

    out = resize(grey_or_rgb, (SIZE, SIZE), anti_aliasing=True)
    return np.repeat(out[..., None], 3, -1) if out.ndim == 2 else out[..., :3]


def _jittered(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A crop of up to 8% less on each side, resized to 48x48, mirrored half the time."""
    n = image.shape[0]
    cut = int(rng.integers(0, max(1, n // 12) + 1))
    top, left = (int(v) for v in rng.integers(0, cut + 1, 2))
    crop = image[top:n - cut + top, left:n - cut + left]
    out = _resize(crop)
    return out[:, ::-1] if rng.random() < 0.5 else out


def _scene_windows(count: int, rng: np.random.Generator) -> list[np.ndarray]:
    from skimage import data

    images = [np.asarray(getattr(data, name)(), dtype=np.float64) for name in SCENES]
    images = [im / 255.0 if im.max() > 1.5 else im for im in images]
    found = []
    for i in range(count):
        im = images[i % len(images)]
        side = int(rng.integers(SIZE, min(im.shape[:2]) // 2))
        top = int(rng.integers(0, im.shape[0] - side))
        left = int(rng.integers(0, im.shape[1] - side))
        found.append(_resize(im[top:top + side, left:left + side]))
    return found


def face_crops(variants: int = 3, scenes: int = 150,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_calib, y_calib, x_held, y_held): float32 [N,3,48,48] as MTCNN feeds ONet
    ((pixel - 127.5) / 128), labels 1 = face, 0 = not."""
    from skimage.data import lfw_subset

    rng = np.random.default_rng(seed)
    lfw = lfw_subset()
    halves: list[tuple[list[np.ndarray], list[int]]] = [([], []), ([], [])]
    for label, images in ((1, lfw[:100]), (0, lfw[100:])):
        order = rng.permutation(len(images))
        for half, part in enumerate((order[:50], order[50:])):
            for i in part:
                for _ in range(variants if label else 1):
                    halves[half][0].append(_jittered(images[i], rng))
                    halves[half][1].append(label)
    windows = _scene_windows(2 * scenes, rng)
    for half in (0, 1):
        halves[half][0].extend(windows[half::2])
        halves[half][1].extend([0] * scenes)
    out = []
    for images, labels in halves:
        x = (np.stack(images).transpose(0, 3, 1, 2) * 255.0 - 127.5) / 128.0
        out += [x.astype(np.float32), np.asarray(labels, dtype=np.int64)]
    return out[0], out[1], out[2], out[3]
