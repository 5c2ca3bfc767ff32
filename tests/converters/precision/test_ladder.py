"""The guard's ladder: which rungs a target has, which a plan can use, and the fp16 rung taken
by a real build for the Pi 5 when int16 cannot hold an activation (both formats shipped)."""

from __future__ import annotations

import pytest
from edgekit.converters import build
from edgekit.converters.search.autoguard import ladder
from edgekit.converters.search.guard import Sensitivity, rungs_for
from edgekit.targets import load_profile

from edgekit import load
from edgekit.artifact.manifest import Manifest
from edgekit.errors import ArtifactError
from edgekit.ops.verify import verify_artifact

from ...conftest import DIGITS_NPZ
from ..sizing import outlier_digits


def test_fp16_rung_only_where_the_cpu_has_fp16_arithmetic():
    assert ladder(load_profile("rpi5")) == ("int8", "int16", "fp16", "float")  # Cortex-A76
    assert ladder(load_profile("rpi4")) == ("int8", "int16", "float")  # Cortex-A72: ARMv8.0


def test_int16_rung_only_for_activations_of_16x8_ops():
    act = Sensitivity("relu", "activation", ["conv"], 5.0, ops={"Conv"})
    weight = Sensitivity("w", "weight", ["conv"], 5.0, ops={"Conv"})
    # Softmax has an int16 kernel (LiteRT's int16 SOFTMAX); Resize has none written
    softmax = Sensitivity("p", "activation", ["sm"], 5.0, ops={"Softmax"})
    resize = Sensitivity("r", "activation", ["up"], 5.0, ops={"Resize"})
    rungs = ("int8", "int16", "fp16", "float")
    assert rungs_for([act], rungs) == ["int16", "fp16", "float"]
    assert rungs_for([weight], rungs) == ["fp16", "float"]  # a16w8 keeps weights int8
    assert rungs_for([softmax], ("int8", "int16", "float")) == ["int16", "float"]
    assert rungs_for([resize], ("int8", "int16", "float")) == ["float"]


def test_manifest_layers_are_typed(digits_artifact):
    raw = dict(load(digits_artifact).spec.raw)
    layers = Manifest.from_dict(raw).layers
    assert layers and {entry.precision for entry in layers} <= {"int8", "float"}
    bad = {**raw, "layers": [{"name": "conv", "op": "Conv", "precision": "int4"}]}
    with pytest.raises(ArtifactError, match=r"layers\[0\]\.precision must be one of int8, int16, fp16, float, got .int4."):
        Manifest.from_dict(bad)


def test_guard_takes_the_fp16_rung_when_int16_cannot_hold_the_range(tmp_path):
    """Two channels 1e5x the others: int16's 65536 steps still crush the rest; fp16 weights
    with float activations (the rung above, on the Pi 5) meet the budget."""
    source = outlier_digits(tmp_path, scale=1e5)
    out = tmp_path / "fp16.edgekit"
    result = build(str(source), target="rpi5", calib=str(DIGITS_NPZ), output=out,
                   formats=["tflite", "onnx"], quiet=True)
    m = result.manifest
    attempts = m["accuracy_guard"]["attempts"]
    assert [a["rung"] for a in attempts[:2]] == ["int16", "fp16"]
    assert not attempts[0]["met"] and attempts[1]["met"]
    layers = {entry["name"]: entry["precision"] for entry in m["layers"]}
    assert layers["node_conv2d"] == layers["node_conv2d_1"] == "fp16" and layers["node_linear"] == "int8"
    assert m["validation"]["accuracy_drop"] <= 1.0
    assert "at fp16" in result.summary() and "mixed precision: 2 layer(s) fp16" in result.summary()
    report = verify_artifact(out)  # each format reproduces its test vectors on its own runtime
    assert report.passed and {f.format for f in report.formats if not f.skipped} == {"tflite", "onnx"}
