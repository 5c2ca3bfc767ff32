"""Shared fixtures: real models, real data, artifacts built once per test session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "raspberrypi"
DIGITS_ONNX = EXAMPLE / "digits_cnn.onnx"
DIGITS_NPZ = EXAMPLE / "digits.npz"
SAMPLES = EXAMPLE / "samples"

sys.path.insert(0, str(ROOT / "tools"))  # ``import zoo`` (tools/zoo: reference models); tools.* import from the root
# every model a build stage writes is checked (converters/graph/check.py): valid ONNX, loads
# in onnxruntime, unique node and tensor names; users' builds skip it for speed
os.environ.setdefault("EDGEKIT_CHECK_GRAPHS", "1")
# two xdist workers on a 2-core runner: torch's OpenMP pool at 2 threads per worker oversubscribes
# the cores and spins (the pruning tests 67 -> 40 s wall side by side, 2026-12-05; 123 s for one test
# in a loaded CI run); onnxruntime's own pools are set per session and do not read this
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def digits_data() -> tuple[np.ndarray, np.ndarray]:
    with np.load(DIGITS_NPZ) as npz:
        return npz["x"], npz["y"]


@pytest.fixture(scope="session")
def digits_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed digits CNN built for rpi4 in both formats (real calibration), so that
    every runtime (LiteRT and onnxruntime) is exercised on one artifact."""
    from edgekit.converters import build

    out = tmp_path_factory.mktemp("digits") / "digits.rpi4.edgekit"
    build(str(DIGITS_ONNX), target="rpi4", calib=str(DIGITS_NPZ), output=out, quiet=True,
          formats=["tflite", "onnx"])
    return out


@pytest.fixture(scope="session")
def digits_onnx_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits CNN built for the host profile, ONNX only."""
    from edgekit.converters import build

    out = tmp_path_factory.mktemp("digits-host") / "digits.host.edgekit"
    build(str(DIGITS_ONNX), target="host", calib=str(DIGITS_NPZ), output=out, quiet=True,
          formats=["onnx"])
    return out
