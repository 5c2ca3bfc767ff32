"""``edgekit build --timings``: each part of the build with its seconds, on stderr, so that a
slow build says where its time went (issue 30: 28 s where round 1 took 5)."""

from __future__ import annotations

from click.testing import CliRunner

from edgekit.cli import cli

from ...conftest import DIGITS_NPZ, DIGITS_ONNX


def test_timings_name_every_stage_and_the_decision(tmp_path):
    out = tmp_path / "digits.edgekit"
    result = CliRunner().invoke(cli, ["build", str(DIGITS_ONNX), "--target", "rpi4", "--calib",
                                      str(DIGITS_NPZ), "-o", str(out), "--format", "onnx",
                                      "--timings", "-q"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out)  # -q: stdout keeps the path alone
    lines = result.stderr.splitlines()
    head = lines.index(next(x for x in lines if x.startswith("timings (wall clock")))
    parts = {line.split()[0]: float(line.split()[1]) for line in lines[head + 1:] if line.strip()}
    for part in ("stages.load", "stages.calibrate", "stages.quantize", "stages.validate",
                 "accuracy_decision", "stages.package"):
        assert part in parts and parts[part] >= 0.0
    assert list(parts.values()) == sorted(parts.values(), reverse=True)
