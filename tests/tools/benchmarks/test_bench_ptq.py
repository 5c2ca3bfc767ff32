"""tools/benchmarks/bench_ptq.py's boundary set: every mix lies next to where the float model's decision
changes (the points just before and just after it are classed differently), so that a
quantizer's changed decisions there are the near-ties one test digit cannot measure."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def linear_classifier(path, rng) -> None:
    w = numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("MatMul", ["f", "w"], ["y"])],
        "linear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_boundary_points_straddle_the_float_decision(tmp_path) -> None:
    from tools.benchmarks import bench_ptq

    rng = np.random.default_rng(0)
    src = tmp_path / "linear.onnx"
    linear_classifier(src, rng)
    x = rng.standard_normal((60, 1, 4, 4)).astype(np.float32)
    points, decisions = bench_ptq.boundary_points(src, x, pairs=32)
    offsets = points.reshape(6, -1, 16)  # t - 0.04, -0.02, -0.01, +0.01, +0.02, +0.04 per pair
    by_offset = decisions.reshape(6, -1)
    assert offsets.shape[1] == 32
    # just before and just after the bisected point the float model decides differently
    assert (by_offset[2] != by_offset[3]).mean() > 0.9
    # and the points are real mixes of two samples, not copies of them
    assert not any(np.allclose(p, s) for p in points[:32].reshape(32, 16) for s in x.reshape(60, 16))
