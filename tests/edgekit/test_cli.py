"""The CLI: exit codes 0 ok / 2 user error / 1 internal, readable output."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from edgekit.cli import main

from ..conftest import DIGITS_NPZ, DIGITS_ONNX


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *args], capture_output=True,
                          text=True)


def test_targets_lists_the_boards():
    proc = run("targets")
    assert proc.returncode == 0
    for name in ("rpi4", "rpi5", "rpi3", "rpi-zero2w", "generic-aarch64", "host"):
        assert name in proc.stdout
    assert "cortex-a72" in proc.stdout


def test_build_inspect_verify(tmp_path):
    out = tmp_path / "d.edgekit"
    proc = run("build", "--target", "host", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ),
               "-o", str(out), "--format", "onnx", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "smaller" in proc.stdout and "accuracy" in proc.stdout
    proc = run("inspect", str(out))
    assert proc.returncode == 0 and "quantization" in proc.stdout and "image" in proc.stdout
    assert json.loads(run("inspect", "--json", str(out)).stdout)["target"]["name"] == "host"
    proc = run("verify", str(out))
    assert proc.returncode == 0 and "PASS" in proc.stdout


def test_unknown_target_exit_2(tmp_path):
    proc = run("build", "--target", "nope", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ))
    assert proc.returncode == 2
    assert "unknown target 'nope'" in proc.stderr and "rpi4" in proc.stderr


def test_missing_target_names_allowed():
    assert main(["build", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ)]) == 2


def test_missing_calibration_exit_2(tmp_path, capsys):
    code = main(["build", "--target", "host", str(DIGITS_ONNX), "-o", str(tmp_path / "a.edgekit")])
    assert code == 2
    assert "--calib" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_verify_fails_on_tampered_test_vectors(digits_onnx_artifact, tmp_path):
    """A consistent tamper (hash updated) passes the load check but fails verification: exit 2."""
    import hashlib
    import io

    import numpy as np

    bad = tmp_path / "tampered.edgekit"
    with zipfile.ZipFile(digits_onnx_artifact) as zin:
        members = {n: zin.read(n) for n in zin.namelist()}
    with np.load(io.BytesIO(members["test_vectors.npz"])) as npz:
        arrays = {k: npz[k] for k in npz.files}
    key = next(k for k in arrays if k.startswith("out/"))
    arrays[key] = arrays[key] + 1.0
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    members["test_vectors.npz"] = buf.getvalue()
    manifest = json.loads(members["manifest.json"])
    manifest["files"]["test_vectors.npz"] = hashlib.sha256(buf.getvalue()).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(bad, "w") as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    proc = run("verify", str(bad))
    assert proc.returncode == 2
    assert "FAIL" in proc.stdout


@pytest.mark.parametrize("args", [["inspect", "/no/such.edgekit"], ["verify", "/no/such.edgekit"]])
def test_missing_artifact_exit_2(args):
    proc = run(*args)
    assert proc.returncode == 2 and "no such artifact" in proc.stderr
