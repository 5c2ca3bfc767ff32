"""The flatbuffer itself: file identifier, 16-byte aligned constant buffers, int8 I/O with
scales recorded, and several inputs mapped by name."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .helpers import parity, quantize


def _two_input_model() -> onnx.ModelProto:
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.normal(0, 0.3, (6, 2, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(0, 0.1, 6).astype(np.float32), "b")
    scale = numpy_helper.from_array(np.asarray([1.5], np.float32), "k")
    nodes = [
        helper.make_node("Mul", ["second", "k"], ["scaled"]),
        helper.make_node("Add", ["first", "scaled"], ["sum"]),
        helper.make_node("Conv", ["sum", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["y"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "two",
        [helper.make_tensor_value_info("first", TensorProto.FLOAT, [1, 2, 5, 7]),
         helper.make_tensor_value_info("second", TensorProto.FLOAT, [1, 2, 5, 7])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 6, 5, 7])], [w, b, scale])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_two_inputs_parity_and_io_description(tmp_path):
    rng = np.random.default_rng(8)
    calib = {n: rng.standard_normal((16, 2, 5, 7)).astype(np.float32)
             for n in ("first", "second")}
    path = quantize(_two_input_model(), tmp_path, calib, "uint8")
    feeds = {n: rng.standard_normal((8, 2, 5, 7)).astype(np.float32) for n in calib}
    model, within, worst = parity(path, feeds)
    assert within[0] >= 0.99, worst
    assert [i["name"] for i in model.inputs] == ["first", "second"]
    for info in (*model.inputs, *model.outputs):
        assert info["dtype"] == "int8" and info["layout"] == "NHWC"
        assert info["quantization"]["scale"] > 0


def test_file_identifier_and_aligned_buffers(tmp_path):
    from ai_edge_litert import schema_py_generated as schema

    rng = np.random.default_rng(9)
    calib = {n: rng.standard_normal((8, 2, 5, 7)).astype(np.float32) for n in ("first", "second")}
    path = quantize(_two_input_model(), tmp_path, calib, "int8")
    from edgekit.converters.tflite import convert

    data = convert(onnx.load(str(path))).data
    assert data[4:8] == b"TFL3"
    raw = np.frombuffer(data, np.uint8)
    root = schema.Model.GetRootAs(raw, 0)
    offsets = []
    for i in range(root.BuffersLength()):
        vec = root.Buffers(i).DataAsNumpy()
        if isinstance(vec, np.ndarray) and vec.size:
            offsets.append(vec.ctypes.data - raw.ctypes.data)
    assert offsets and all(o % 16 == 0 for o in offsets), offsets
