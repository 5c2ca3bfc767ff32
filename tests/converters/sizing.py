"""Shared helpers for the pruning / guard / search tests: the trained digits CNN as torch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from ..conftest import DIGITS_ONNX, EXAMPLE

TRAIN_SCRIPT = EXAMPLE / "train_digits.py"
TORCH_SOURCE = f"{TRAIN_SCRIPT}:DigitsCNN"


def digits_module():
    """DigitsCNN from examples/raspberrypi/train_digits.py with the committed trained weights.

    The ONNX file's initializers carry the state-dict names (features.0.weight, ...), so the
    trained weights come from it instead of a minute of re-training."""
    import onnx
    import torch
    from onnx import numpy_helper

    spec = importlib.util.spec_from_file_location("train_digits", TRAIN_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.DigitsCNN()
    inits = onnx.load(str(DIGITS_ONNX)).graph.initializer
    state = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in inits
             if i.name in model.state_dict()}
    model.load_state_dict(state, strict=True)
    return model.eval()


def digits_weights(folder: Path) -> Path:
    """The trained state dict as a .pth file (what --weights takes)."""
    import torch

    path = folder / "digits_cnn.pth"
    torch.save(digits_module().state_dict(), path)
    return path


def outlier_digits(folder: Path, scale: float = 300.0) -> Path:
    """The digits CNN re-parameterized so int8 fails: two channels of the first conv scaled up
    by ``scale`` and the second conv's inputs from them scaled down (ReLU is positively
    homogeneous, so float outputs are unchanged). One per-tensor activation range then spans
    300x the others' values and int8 crushes the other 30 channels."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(DIGITS_ONNX))
    inits = {i.name: i for i in model.graph.initializer}
    arrays = {n: numpy_helper.to_array(inits[n]).copy()
              for n in ("features.0.weight", "features.0.bias", "features.2.weight")}
    for c in (0, 1):
        arrays["features.0.weight"][c] *= scale
        arrays["features.0.bias"][c] *= scale
        arrays["features.2.weight"][:, c] /= scale
    for name, value in arrays.items():
        inits[name].CopyFrom(numpy_helper.from_array(value.astype(np.float32), name))
    path = folder / "digits_outlier.onnx"
    onnx.save(model, str(path))
    return path
