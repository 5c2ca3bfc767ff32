"""Reference models for tests and benchmarks (issue 13's zoo), one model family per module.

``ENTRIES`` maps a name to a ``ZooEntry``: the model's factory, seeded example inputs, I/O
names, dynamic axes, the exporter that works for it, batch axes and calibration-data shape, and
``write_onnx(path)``. Random-weight models (seeded, eval mode) exist for coverage, shape and
speed only; trained weights: the committed digits CNN (``digits_paths()`` / ``digits_data()``)
and MTCNN's PNet (facenet-pytorch's weights).

torch is imported inside functions so that ``digits_paths()``/``digits_data()`` work without it.
Use from tests or scripts with ``sys.path.insert(0, "<repo>/tools"); import zoo``.

CLI: ``python tools/zoo OUT_DIR [NAME ...]`` exports zoo models to OUT_DIR/<name>.onnx.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .classic import mobilenetv2_like, plain_cnn, transformer_block
from .common import DEFAULT_OPSET, export_onnx, make_divisible, param_count
from .registry import ENTRIES, ZooEntry

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["DEFAULT_OPSET", "ENTRIES", "MODELS", "ZooEntry", "digits_data", "digits_paths",
           "entry", "example_input", "export_onnx", "make_divisible", "mobilenetv2_like",
           "param_count", "plain_cnn", "transformer_block"]

REPO = Path(__file__).resolve().parents[2]
DIGITS_DIR = REPO / "examples" / "raspberrypi"

# name -> (factory, example input shape) for every single-input float model (older callers)
MODELS: dict[str, tuple[Callable[..., nn.Module], tuple[int, ...]]] = {
    e.name: (e.factory, e.inputs[0][1]) for e in ENTRIES.values() if len(e.inputs) == 1
}


def entry(name: str) -> ZooEntry:
    if name not in ENTRIES:
        raise KeyError(f"expected a zoo model name in {sorted(ENTRIES)}, got {name!r}")
    return ENTRIES[name]


def example_input(name: str, seed: int = 0) -> torch.Tensor:
    """The zoo model's first example input (seeded)."""
    return entry(name).example_inputs(seed)[0]


# --------------------------------------------------------------------------- real trained model
def digits_paths() -> tuple[Path, Path]:
    """(digits_cnn.onnx, digits.npz) committed under examples/raspberrypi."""
    return DIGITS_DIR / "digits_cnn.onnx", DIGITS_DIR / "digits.npz"


def digits_data() -> tuple[np.ndarray, np.ndarray]:
    """Held-out real digits: x float32 [N,1,8,8] in [0,1], y int64 [N]."""
    _, npz = digits_paths()
    with np.load(npz) as data:
        return data["x"], data["y"]


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python tools/zoo OUT_DIR [NAME ...]", file=sys.stderr)
        return 2
    out, names = Path(argv[0]), argv[1:] or list(ENTRIES)
    for name in names:
        e = entry(name)
        module = e.factory()
        path = e.write_onnx(out / f"{name}.onnx", module)
        print(f"{name:20s} params={param_count(module):>11,d}  "
              f"onnx_bytes={path.stat().st_size:>11,d}  {e.exporter:<11s} {path}")
    digits_onnx, digits_npz = digits_paths()
    print(f"{'digits_cnn':20s} (trained) {digits_onnx}  data {digits_npz}")
    return 0
