"""Symbolic dims are pinned per position, whatever their names (issue 30).

Paddle2ONNX writes the PP-OCR angle classifier's input as ``[-1, 3, '?', '?']``: H and W
carry one name. onnxruntime's ``make_input_shape_fixed`` treats a name as one dimension, so
pinning H=48 then W=192 failed ("Can't replace existing fixed size of 48 with 192").
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from edgekit.converters import build
from edgekit.converters.graph.shapes import fixed_input_shapes, pin_inputs
from onnx import TensorProto, helper, numpy_helper

import edgekit


def paddle_like(path, dims: list[int | str]) -> str:
    """Conv -> GlobalAveragePool -> Reshape -> MatMul -> Softmax, the angle classifier's
    skeleton, with the input dims given (``-1`` for the batch, as Paddle writes it)."""
    rng = np.random.default_rng(0)
    weights = {"w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3,
               "b": np.zeros(8, np.float32),
               "fc": rng.standard_normal((8, 2)).astype(np.float32),
               "flat": np.array([-1, 8], np.int64)}
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 2])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
             helper.make_node("Reshape", ["g", "flat"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "fc"], ["logits"], name="fc"),
             helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=1)]
    graph = helper.make_graph(nodes, "cls", [x], [y],
                              initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), str(path))
    return str(path)


def dims(vi: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param
            for d in vi.type.tensor_type.shape.dim]


def test_one_name_on_two_axes_takes_two_values(tmp_path):
    model = onnx.load(paddle_like(tmp_path / "cls.onnx", [-1, 3, "?", "?"]))
    pinned = pin_inputs(model, {"x": (1, 3, 48, 192)})
    assert dims(pinned.graph.input[0]) == [1, 3, 48, 192]
    onnx.checker.check_model(onnx.shape_inference.infer_shapes(pinned), full_check=True)
    # the estimator's policy pins the open dims after the batch to 1: no clash either
    assert dims(fixed_input_shapes(model, 2).graph.input[0]) == [2, 3, 1, 1]


def test_a_name_pinned_to_one_value_is_that_value_through_the_graph(tmp_path):
    model = onnx.load(paddle_like(tmp_path / "cls.onnx", ["N", 3, "side", "side"]))
    model.graph.value_info.append(helper.make_tensor_value_info("c", TensorProto.FLOAT,
                                                                ["N", 8, "side", "side"]))
    fixed = fixed_input_shapes(model, 1)
    assert dims(fixed.graph.input[0]) == [1, 3, 1, 1]
    assert dims(fixed.graph.value_info[0]) == [1, 8, 1, 1]


def test_a_name_pinned_to_two_values_leaves_no_stale_shape(tmp_path):
    model = onnx.load(paddle_like(tmp_path / "cls.onnx", ["N", 3, "side", "side"]))
    model.graph.value_info.append(helper.make_tensor_value_info("c", TensorProto.FLOAT,
                                                                ["N", 8, "side", "side"]))
    pinned = pin_inputs(model, {"x": (1, 3, 48, 192)})
    assert dims(pinned.graph.input[0]) == [1, 3, 48, 192]
    inferred = onnx.shape_inference.infer_shapes(pinned, strict_mode=True)
    conv = next(v for v in inferred.graph.value_info if v.name == "c")
    assert dims(conv) == [1, 8, 48, 192]


@pytest.mark.parametrize("dynamic_batch", [False, True])
def test_the_angle_classifier_skeleton_builds_at_48x192(tmp_path, dynamic_batch):
    source = paddle_like(tmp_path / "cls.onnx", [-1, 3, "?", "?"])
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "lines.npz", x=rng.random((16, 3, 48, 192), dtype=np.float32))
    result = build(source, target="rpi4", calib=str(tmp_path / "lines.npz"), quiet=True,
                   output=tmp_path / "cls.edgekit", formats=["onnx"], guard_time=0,
                   dynamic_batch=dynamic_batch)
    assert result.manifest["inputs"][0]["shape"] == ["?" if dynamic_batch else 1, 3, 48, 192]
    model = edgekit.load(str(result.path))
    try:
        batch = 2 if dynamic_batch else 1
        assert model.predict(np.zeros((batch, 3, 48, 192), np.float32)).shape == (batch, 2)
    finally:
        model.close()


def test_a_shared_name_binds_across_inputs_not_within_one():
    from edgekit.converters.context import Dataset
    from edgekit.converters.stages.pin import shapes_from_data

    from edgekit.errors import CalibrationError

    lines = Dataset({"x": np.zeros((2, 3, 48, 192), np.float32)}, None, "lines")
    inputs = [{"name": "x", "shape": [-1, 3, "side", "side"]}]
    assert shapes_from_data(inputs, [lines], False) == {"x": (1, 3, 48, 192)}
    pair = Dataset({"a": np.zeros((2, 5), np.float32), "b": np.zeros((2, 7), np.float32)}, None, "pair")
    with pytest.raises(CalibrationError, match="symbolic dim 'seq' is 5 .* but 7"):
        shapes_from_data([{"name": "a", "shape": ["N", "seq"]}, {"name": "b", "shape": ["N", "seq"]}],
                         [pair], False)
