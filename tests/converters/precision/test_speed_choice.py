"""Precision chosen by speed: a depthwise-only net is estimated slower at int8 than float on a
Pi 4 (tiny depthwise kernels gain little from int8 and the quantize steps cost); the build
says so, and under the latency objective ships float (the real estimator, real build)."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters import build
from onnx import TensorProto, helper, numpy_helper

from edgekit.ops.verify import verify_artifact


def depthwise_net(path, channels: int = 8, layers: int = 6):
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((channels, 1, 3, 3)) / 3).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"y{i}"], group=channels, pads=[1, 1, 1, 1],
                                      name=f"dw{i}"))
        x = f"y{i}"
    graph = helper.make_graph(nodes, "depthwise", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 16, 16])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, channels, 16, 16])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_latency_objective_ships_float_where_int8_is_slower(tmp_path):
    source = depthwise_net(tmp_path / "dw.onnx")
    calib = np.random.default_rng(1).uniform(-1, 1, (64, 8, 16, 16)).astype(np.float32)
    out = tmp_path / "dw.edgekit"
    result = build(str(source), target="rpi4", calib=calib, output=out, quiet=True, objective="latency",
                   formats=["tflite"])
    m = result.manifest
    speed = m["precision_speed"]
    assert speed["int8_speedup"] < 1.0 and speed["source"].startswith("estimated for rpi4")
    assert speed["chosen"] == "float" and m["quantization"]["shipped"] == "float"
    assert m["validation"]["accuracy_drop"] == 0.0
    assert {entry["precision"] for entry in m["layers"]} == {"float"}
    assert "int8 is SLOWER than float" in result.summary() and "shipping float" in result.summary()
    assert verify_artifact(out).passed
