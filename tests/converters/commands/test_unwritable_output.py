"""An output path that cannot be written: a user error (exit 2) naming it, before any work,
for every command that writes (issue 35: a read-only folder was "internal error", exit 1,
and `build` found out only when writing its artifact, the whole build lost)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgekit.cli import main
from tests.conftest import DIGITS_NPZ, DIGITS_ONNX


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody can create files in: root ignores mode bits, so it gets the immutable
    attribute (chattr +i) there; others get mode 0555."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(
                ["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("running as root without chattr +i: no folder root cannot write")
        yield folder
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)


def edgekit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *map(str, args)],
                          capture_output=True, text=True)


def assert_named_user_error(proc: subprocess.CompletedProcess, path: Path) -> None:
    assert proc.returncode == 2, proc.stderr
    assert f"{str(path)!r}" in proc.stderr and "not writable" in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


BUILD = ["build", "-t", "host", DIGITS_ONNX, "--calib", DIGITS_NPZ, "--format", "onnx"]


@pytest.mark.parametrize("where", ["x.edgekit", "new/dir/x.edgekit"])
def test_build_into_read_only_folder_fails_before_any_work(read_only, where):
    out = read_only / where
    proc = edgekit(*BUILD, "-o", out)
    assert_named_user_error(proc, out)
    assert "calibration:" not in proc.stderr  # stopped before the data was even read


def test_build_report_path_checked_before_the_build(read_only, tmp_path):
    page = read_only / "r.html"
    proc = edgekit(*BUILD, "-o", tmp_path / "ok.edgekit", "--report", page)
    assert_named_user_error(proc, page)
    assert not (tmp_path / "ok.edgekit").exists()


def test_report_into_read_only_folder(read_only, digits_onnx_artifact):
    page = read_only / "r.html"
    assert_named_user_error(edgekit("report", digits_onnx_artifact, "-o", page), page)


def test_keygen_into_read_only_folder(read_only, tmp_path):
    key = read_only / "k.pem"
    assert_named_user_error(edgekit("keygen", key), key)
    public = read_only / "k.pub"
    assert_named_user_error(edgekit("keygen", tmp_path / "k.pem", "--public", public), public)
    assert not (tmp_path / "k.pem").exists()  # neither key written when one cannot be


def test_bundle_into_read_only_folder(read_only, digits_onnx_artifact):
    out = read_only / "bundle"
    assert main(["bundle", str(digits_onnx_artifact), "-t", "rpi4", "-o", str(out), "-q"]) == 2
    assert_named_user_error(edgekit("bundle", digits_onnx_artifact, "-t", "rpi4", "-o", out), out)


def test_sign_into_read_only_folder(read_only, tmp_path, digits_onnx_artifact):
    assert edgekit("keygen", tmp_path / "k.pem").returncode == 0
    out = read_only / "s.edgekit"
    assert_named_user_error(edgekit("sign", digits_onnx_artifact, "--key", tmp_path / "k.pem",
                                    "-o", out), out)
