"""The digits bundle installed into the emulated Debian 12 arm64 sysroot, offline, run under
``qemu-aarch64 -cpu cortex-a72``: install.sh, then ``edgekit verify`` and one ``predict``;
a broken update leaves the first artifact current.

install.sh runs on the host's ``sh`` (QEMU user mode has no binfmt here: an aarch64 program
cannot be exec'd by a host shell), with ``EDGEKIT_LAUNCHER`` putting QEMU before every run
of the sysroot's Python, and with no network: ``unshare -n`` where available, and always
``PIP_NO_INDEX=1`` plus the script's own ``--no-index``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest
from edgekit.converters.emulation import CpuSpec, Sysroot
from edgekit.converters.emulation.runner import cpu_view, qemu_binary
from edgekit.targets import load_profile

from edgekit.ops.deploy import link_target
from tests.conftest import DIGITS_NPZ
from tests.converters.emulation.conftest import sysroot  # noqa: F401  (fixture)
from tests.converters.emulation.test_emulate import tamper

from .conftest import BUNDLE_NAME, SHIPPED

pytestmark = [pytest.mark.emulated, pytest.mark.slow]  # a few minutes under emulation
NAME = "digits.rpi4"


def offline() -> list[str]:
    """``unshare -n`` (no network namespace but loopback) when this machine allows it."""
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"]).returncode == 0:
        return ["unshare", "-n"]
    return []


@pytest.fixture(scope="module")
def device(sysroot: Sysroot, digits_bundle: Path,  # noqa: F811
           tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("device")
    with tarfile.open(digits_bundle) as tar:
        tar.extractall(work, filter="data")
    cpu = CpuSpec.from_profile(load_profile("rpi4"))
    launcher = [qemu_binary(cpu), "-L", str(cpu_view(sysroot, cpu)), "-cpu", cpu.model]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(work / "home"),
           "TMPDIR": str(work), "PYTHON": str(sysroot.python), "PIP_NO_INDEX": "1",
           "EDGEKIT_LAUNCHER": " ".join(launcher), "XDG_CONFIG_HOME": str(work / "config")}
    prefix = work / "home" / "edgekit"
    script = work / BUNDLE_NAME[: -len(".tar.gz")] / "install.sh"
    proc = subprocess.run([*offline(), "sh", str(script), "--prefix", str(prefix)], env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return {"work": work, "prefix": prefix, "env": env, "launcher": launcher,
            "install_out": proc.stdout}


def run_device(device: dict, *args: str) -> subprocess.CompletedProcess:
    """The installed venv's Python under QEMU, offline; ``-I`` and a neutral folder: no
    checkout on sys.path, so only what the bundle installed can be imported."""
    python = str(device["prefix"] / "venv" / "bin" / "python")
    return subprocess.run([*offline(), *device["launcher"], python, "-I", *args],
                          env=device["env"], cwd=device["work"], capture_output=True, text=True,
                          timeout=900)


def test_install_sh_installs_offline_and_verifies_on_the_a72(device: dict) -> None:
    out = device["install_out"]
    assert "installing 11 wheels offline" in out or "wheels offline" in out
    assert "tflite on litert 2.3.0: PASS" in out, out
    current = link_target(device["prefix"] / NAME / "current")
    assert current is not None and current.read_bytes() == SHIPPED.read_bytes()


def test_verify_and_predict_run_from_the_venv(device: dict) -> None:
    proc = run_device(device, "-m", "edgekit", "verify", str(device["prefix"] / NAME / "current"))
    assert proc.returncode == 0 and "PASS" in proc.stdout, proc.stdout + proc.stderr
    assert "on aarch64" in proc.stdout and "litert" in proc.stdout
    code = ("import sys, numpy as np, edgekit; "
            "x = np.load(sys.argv[2])['x'][:1]; "
            "m = edgekit.load(sys.argv[1]); y = m.predict(x); m.close(); "
            "print(edgekit.__file__); print('predicted', int(np.argmax(y)))")
    proc = run_device(device, "-c", code, str(device["prefix"] / NAME / "current"),
                      str(DIGITS_NPZ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    where, predicted = proc.stdout.strip().splitlines()[-2:]
    assert where.startswith(str(device["prefix"] / "venv"))  # the bundle's wheel, not the sysroot's
    with np.load(DIGITS_NPZ) as npz:
        assert predicted == f"predicted {int(npz['y'][0])}"


def test_a_broken_update_leaves_the_first_artifact_current(device: dict) -> None:
    first = link_target(device["prefix"] / NAME / "current")
    broken = device["work"] / "update" / f"{NAME}.edgekit"
    broken.parent.mkdir()
    tamper(SHIPPED, broken)  # hashes valid, expected outputs 10 steps off
    proc = run_device(device, "-m", "edgekit", "install", str(broken),
                      "--root", str(device["prefix"]))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "did not reproduce" in proc.stderr
    assert link_target(device["prefix"] / NAME / "current") == first
    assert os.listdir(device["prefix"] / NAME / "releases") == [first.name]
