"""``edgekit estimate`` through the CLI: the table, JSON on a built artifact, bad options."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from click.testing import CliRunner
from edgekit.targets import load_profile
from onnx import TensorProto

from edgekit.cli import cli

from ...conftest import DIGITS_ONNX as DIGITS


def test_estimate_command_on_onnx_and_on_a_built_artifact(tmp_path: Path) -> None:
    params = sum(int(np.prod(i.dims)) for i in onnx.load(str(DIGITS)).graph.initializer
                 if i.data_type == TensorProto.FLOAT)
    result = CliRunner().invoke(cli, ["estimate", "--target", "rpi4", str(DIGITS)])
    assert result.exit_code == 0, result.output
    for label in ("parameters", "MACs (conv+gemm)", "weight memory", "peak activations",
                  "RAM (load + run)", "latency, 1 thread", "latency, 4 threads",
                  "energy/inf, 4 threads", "float32", "int8"):
        assert label in result.output
    assert f"{params / 1e3:.2f} k" in result.output

    from edgekit.artifact.archive import write_artifact

    artifact = tmp_path / "digits.edgekit"
    profile = load_profile("rpi4")  # the least manifest a device accepts (Manifest.from_dict)
    manifest = {"target": {"name": profile.name, "sha256": profile.sha256,
                           "profile": profile.to_dict()},
                "inputs": [{"name": "x", "shape": [1, 1, 28, 28]}], "outputs": [],
                "models": [{"format": "onnx", "path": "model.onnx"}]}
    write_artifact(artifact, manifest, {"model.onnx": DIGITS.read_bytes()})
    result = CliRunner().invoke(cli, ["estimate", "-t", "rpi4", "--threads", "2",
                                      "--json", str(artifact)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["threads"] == [2] and data["target"] == "rpi4"
    assert data["variants"]["float32"]["params"] == params


def test_bad_thread_counts_are_usage_errors_naming_the_option() -> None:
    for bad in ("0", "1,x", "2,,4"):
        result = CliRunner().invoke(cli, ["estimate", "--threads", bad, str(DIGITS)])
        assert result.exit_code == 2, result.output
        assert "--threads expects counts >= 1" in result.output and repr(bad) in result.output
