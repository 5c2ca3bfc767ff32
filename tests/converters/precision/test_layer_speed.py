"""Precision chosen by speed, per layer: on a target whose depthwise int8 kernels are slow (a
profile with the Pi 4's figures but depthwise int8 at 0.2 GMAC/s), a net int8 speeds up overall
keeps its depthwise layer float under the latency objective and says so otherwise (the real
estimator and build; the estimate decides, so the outcome does not depend on timing)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from edgekit.converters import build
from edgekit.converters.search.layer_speed import slower_layers
from edgekit.targets import PROFILE_DIR, load_profile
from onnx import TensorProto, helper, numpy_helper

from edgekit.ops.verify import verify_artifact


@pytest.fixture
def slow_depthwise(tmp_path):
    text = (PROFILE_DIR / "rpi4.toml").read_text()
    text = re.sub(r"(?m)^name = .*$", 'name = "slow-dw"', text)
    text = re.sub(r"(?m)^depthwise_gmacs_i8 = [0-9.]+", "depthwise_gmacs_i8 = 0.2", text)
    path = tmp_path / "slow-dw.toml"
    path.write_text(text)
    return path


def conv_then_depthwise(path):
    """Two dense 3x3 convs (32 channels, 32x32: int8 wins) around one depthwise 3x3."""
    rng = np.random.default_rng(0)
    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:])))
                                       .astype(np.float32), name)
    inits = [weight("w0", (32, 3, 3, 3)), weight("w1", (32, 32, 3, 3)), weight("wd", (32, 1, 3, 3)),
             weight("w2", (32, 32, 3, 3))]
    pads = [1, 1, 1, 1]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=pads, name="stem"),
             helper.make_node("Relu", ["a"], ["ar"], name="r0"),
             helper.make_node("Conv", ["ar", "w1"], ["b"], pads=pads, name="conv1"),
             helper.make_node("Relu", ["b"], ["br"], name="r1"),
             helper.make_node("Conv", ["br", "wd"], ["c"], pads=pads, group=32, name="dw"),
             helper.make_node("Relu", ["c"], ["cr"], name="r2"),
             helper.make_node("Conv", ["cr", "w2"], ["y"], pads=pads, name="conv2")]
    graph = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 32, 32])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture
def calib():
    return np.random.default_rng(1).uniform(0, 1, (32, 3, 32, 32)).astype(np.float32)


def test_the_estimate_names_only_the_layers_int8_makes_slower(tmp_path, slow_depthwise, calib):
    out = build(str(conv_then_depthwise(tmp_path / "m.onnx")), target=str(slow_depthwise), calib=calib,
                output=tmp_path / "m.edgekit", quiet=True, formats=["onnx"])
    section = out.manifest["precision_speed"]["layers"]
    assert section["slower_at_int8"] == {"depthwise": ["dw"]}
    assert section["groups"] == {} and section["float"] == []  # the accuracy objective only says so
    assert out.manifest["precision_speed"]["chosen"] == "int8"  # int8 is faster for the model
    assert "int8 is slower than float for 1 layer(s) (1 depthwise" in out.summary()


def test_latency_objective_ships_the_slower_layer_float(tmp_path, slow_depthwise, calib):
    out = build(str(conv_then_depthwise(tmp_path / "m.onnx")), target=str(slow_depthwise), calib=calib,
                output=tmp_path / "m.edgekit", quiet=True, formats=["onnx", "tflite"], objective="latency")
    m = out.manifest
    section = m["precision_speed"]["layers"]
    assert section["groups"]["depthwise"]["kept"] and section["groups"]["depthwise"]["time_vs_int8"] < 0.98
    assert section["float"] == ["dw"]
    assert m["quantization"]["mixed_precision"] == {"rung": "float", "nodes": ["dw"], "reason": "speed"}
    precision = {entry["name"]: entry["precision"] for entry in m["layers"]}
    assert precision["dw"] == "float" and precision["conv1"] == "int8" and precision["conv2"] == "int8"
    why = {entry["name"]: entry.get("reason") for entry in m["layers"]}
    assert why["dw"].startswith("kept float for speed")
    assert "shipping 1 float" in out.summary()
    assert verify_artifact(out.path).passed


def test_the_pi4_rates_find_no_such_layer(tmp_path, calib):
    path = conv_then_depthwise(tmp_path / "m.onnx")
    out = build(str(path), target="rpi4", calib=calib, output=tmp_path / "m.edgekit", quiet=True,
                formats=["onnx"])
    assert "layers" not in (out.manifest.get("precision_speed") or {})
    assert slower_layers(tmp_path / "m.onnx", load_profile("rpi4")) == {}
