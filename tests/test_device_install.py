"""A device install: this project's wheel in a fresh venv with the ``[litert]`` extra only.

Builds the wheel from a copy of the source (the tree itself is never written to), installs it
with its device dependencies from the package index, then runs the real ``edgekit`` console
script: device commands work on the shipped example, host commands are user errors (exit 2)
naming the extra that brings them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgekit.commands import HOST_COMMANDS, INSTALL_HOST_TOOLS

from .conftest import ROOT, SAMPLES

pytestmark = pytest.mark.slow  # about a minute: a venv and a pip install from the index
SHIPPED = ROOT / "examples" / "raspberrypi" / "digits.rpi4.edgekit"
SOURCES = ("setup.py", "pyproject.toml", "README.md", "edgekit", "converters", "targets")


def checked(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd)
    assert proc.returncode == 0, f"{' '.join(argv)}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def device(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The venv's bin folder: edgekit-sdk[litert] from a wheel of this tree, nothing else."""
    work = tmp_path_factory.mktemp("device-install")
    src = work / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    # built as pip builds any sdist: in isolation, with pyproject.toml's build requirements
    checked([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
             "-w", str(work / "dist"), str(src)], work)
    wheel = next((work / "dist").glob("edgekit_sdk-*.whl"))
    checked([sys.executable, "-m", "venv", str(work / "venv")], work)
    bin_dir = work / "venv" / "bin"
    # the wheel by path: an index's own "edgekit" can never stand in for it
    checked([str(bin_dir / "python"), "-m", "pip", "install", "-q",
             "--disable-pip-version-check", f"{wheel}[litert]"], work)
    return bin_dir


def edgekit(device: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(device / "edgekit"), *args], capture_output=True, text=True,
                          cwd=device.parent)


def test_the_venv_holds_the_device_dependencies_only(device: Path) -> None:
    code = ("import importlib.util as u; print([m for m in ('onnx', 'onnxruntime', 'torch', "
            "'PIL', 'platformdirs', 'filelock') if u.find_spec(m)])")
    proc = checked([str(device / "python"), "-c", code], device.parent)
    assert proc.stdout.strip() == "[]"


def test_host_commands_exit_2_naming_the_extra(device: Path) -> None:
    for args in (["build", "model.onnx", "--target", "rpi4", "--calib", "synthetic"],
                 ["estimate", "--target", "rpi4", str(SHIPPED)],
                 ["emulate", "--target", "rpi4", str(SHIPPED)], ["calibrate-host"],
                 ["build", "--help"]):
        proc = edgekit(device, *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert INSTALL_HOST_TOOLS in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert f"`edgekit {args[0]}` runs on the host" in proc.stderr
    listing = edgekit(device, "--help").stdout
    for name in HOST_COMMANDS:
        line = next(line for line in listing.splitlines() if line.strip().startswith(name))
        assert "host-only" in line and INSTALL_HOST_TOOLS in line, listing


def test_verify_and_bench_work_on_litert(device: Path) -> None:
    proc = edgekit(device, "verify", str(SHIPPED))
    assert proc.returncode == 0, proc.stderr
    assert "tflite on litert" in proc.stdout and "onnx: skipped" in proc.stdout
    assert proc.stdout.rstrip().endswith("PASS")
    proc = edgekit(device, "bench", str(SHIPPED), "--threads", "1,auto", "--duration", "0.2",
                   "--warmup", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["threads"].split("->")[0] for r in rows] == ["1", "auto"]
    assert all(r["runtime"] == "litert" and r["runs"] >= 1 for r in rows)
    proc = edgekit(device, "bench", str(SHIPPED), "--batch", "0")
    assert proc.returncode == 2 and "--batch expects" in proc.stderr


def test_run_classifies_once_pillow_is_there(device: Path) -> None:
    image = str(SAMPLES / "3_0021.png")
    proc = edgekit(device, "run", str(SHIPPED), image)
    assert proc.returncode == 2 and "edgekit-sdk[image]" in proc.stderr, proc.stderr  # [litert] only
    checked([str(device / "python"), "-m", "pip", "install", "-q",
             "--disable-pip-version-check", "pillow>=9"], device.parent)
    proc = edgekit(device, "run", str(SHIPPED), image, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["top"][0]["class"] == 3


def test_loading_imports_no_host_module(device: Path) -> None:
    code = ("import sys, edgekit; m = edgekit.load(sys.argv[1]); "
            "m.predict(m.artifact.test_vectors()['in/image'][:1]); "
            "print(sorted(n for n in sys.modules if n.startswith('edgekit.converters') "
            "or n.split('.')[0] in ('onnx', 'onnxruntime', 'torch', 'PIL')))")
    proc = checked([str(device / "python"), "-c", code, str(SHIPPED)], device.parent)
    assert proc.stdout.strip().splitlines()[-1] == "[]"
