"""An ONNX source whose weights live in an external data file: read from the model's folder,
counted in the source's size (the summary once said "28.4 kB -> 1.37 MB, 0.0x smaller" for a
7 MB model), and a missing data file named."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from edgekit.converters import build
from onnx import TensorProto, helper, numpy_helper

from edgekit.errors import ModelFormatError

WIDTH = 512  # 512 x 512 float32 weights: 1 MB in the data file, a few hundred bytes of graph


def external_model(folder):
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array((rng.standard_normal((WIDTH, WIDTH)) * 0.05).astype(np.float32), "w")
    bias = numpy_helper.from_array(np.zeros(WIDTH, np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])], [weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / "wide.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="wide.onnx.data", size_threshold=1024)
    return path


def test_size_counts_the_external_data(tmp_path):
    path = external_model(tmp_path)
    graph_bytes = path.stat().st_size
    data_bytes = (tmp_path / "wide.onnx.data").stat().st_size
    assert graph_bytes < 2048 and data_bytes >= WIDTH * WIDTH * 4
    calib = np.random.default_rng(1).standard_normal((32, WIDTH)).astype(np.float32)
    result = build(str(path), target="rpi4", calib=calib, output=tmp_path / "wide.edgekit",
                   formats=["onnx"], quiet=True, accept_accuracy_drop=True)
    m = result.manifest
    assert m["sizes"]["source_bytes"] == graph_bytes + data_bytes
    assert m["source"]["external_data"] == ["wide.onnx.data"]
    line = next(x for x in result.summary().splitlines() if "size: source" in x)
    ratio = float(line.split(", ")[-1].split("x smaller")[0])
    assert ratio >= 1.0, line  # was 0.0x: the graph file alone against the artifact


def test_a_missing_data_file_is_named(tmp_path):
    path = external_model(tmp_path)
    (tmp_path / "wide.onnx.data").unlink()
    with pytest.raises(ModelFormatError, match="wide.onnx.data"):
        build(str(path), target="rpi4", calib="synthetic", output=tmp_path / "w.edgekit", quiet=True)
