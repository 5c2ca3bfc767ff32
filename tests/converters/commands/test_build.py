"""``edgekit build`` through the CLI: exit codes 0 / 2, its output, the option types."""

from __future__ import annotations

import json
import subprocess
import sys

from edgekit.cli import main

from ...conftest import DIGITS_NPZ, DIGITS_ONNX


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *args], capture_output=True,
                          text=True)


def test_build_inspect_verify(tmp_path):
    out = tmp_path / "d.edgekit"
    proc = run("build", "--target", "host", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ),
               "-o", str(out), "--format", "onnx")
    assert proc.returncode == 0, proc.stderr
    assert "smaller" in proc.stdout and "accuracy" in proc.stdout
    assert "int8 steps" in proc.stdout and "compressed" in proc.stdout  # units and sizes said
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


def test_bad_size_and_mean_are_usage_errors_before_any_work(tmp_path, capsys):
    out = tmp_path / "never.edgekit"
    for option, value, expected in (("--size", "224", "--size expects HxW"),
                                    ("--size", "0x8", "--size expects HxW"),
                                    ("--mean", "0.5,x", "--mean expects numbers"),
                                    ("--input-shape", "1x3xfoo", "--input-shape expects")):
        code = main(["build", str(DIGITS_ONNX), "--target", "host", "--calib", str(DIGITS_NPZ),
                     "-o", str(out), option, value])
        err = capsys.readouterr().err
        assert code == 2 and expected in err and repr(value.split(",")[-1]) in err, err
    assert list(tmp_path.iterdir()) == []
