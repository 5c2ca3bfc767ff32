"""Fixtures for the emulated suite: QEMU present (or a clear skip, never in CI), the arm64
sysroot built once per session, and artifacts built by the real pipeline."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from edgekit.converters.emulation import Sysroot, ensure_sysroot, recipe_for
from edgekit.targets import load_profile

QEMU = "qemu-aarch64-static"


def require_qemu() -> None:
    """Skip locally when QEMU is missing; in CI (CI=true) the emulated suite must run."""
    if shutil.which(QEMU) is None:
        message = f"{QEMU} is not installed (apt-get install qemu-user-static)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}: CI must run the emulated suite, not skip it")
        pytest.skip(message)


@pytest.fixture(scope="session")
def sysroot() -> Sysroot:
    """The cached arm64 sysroot (built from nothing when the cache is empty: about 15 s)."""
    require_qemu()
    return ensure_sysroot(recipe_for(load_profile("rpi4")),
                          progress=lambda m: print(m, file=sys.stderr))


@pytest.fixture(scope="session")
def zero2w_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed digits CNN built for the Pi Zero 2 W with the profile's preferred format."""
    from edgekit.converters import build

    from tests.conftest import DIGITS_NPZ, DIGITS_ONNX

    out = tmp_path_factory.mktemp("digits-zero2w") / "digits.rpi-zero2w.edgekit"
    build(str(DIGITS_ONNX), target="rpi-zero2w", calib=str(DIGITS_NPZ), output=out, quiet=True)
    return out


@pytest.fixture(scope="session")
def mobilenetv2_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A MobileNetV2-size model (3.5 M parameters, 224x224, random weights: size and op mix
    only) built for rpi4 in both formats on synthetic calibration, kept small: minmax, few
    samples."""
    import zoo  # tools/zoo, on sys.path via tests/conftest.py
    from edgekit.converters import build

    folder = tmp_path_factory.mktemp("mobilenetv2")
    onnx_path = zoo.export_onnx(zoo.mobilenetv2_like(), zoo.example_input("mobilenetv2_like"),
                                folder / "mobilenetv2.onnx")
    out = folder / "mobilenetv2.rpi4.edgekit"
    build(str(onnx_path), target="rpi4", calib="synthetic", output=out, method="minmax",
          calib_samples=8, val_samples=4, test_vectors=2, quiet=True,
          formats=["tflite", "onnx"])  # both runtimes verified under emulation
    return out
