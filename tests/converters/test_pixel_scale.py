"""The 0..255 check looks at the values whatever their fractions, and only at image inputs
(issue 35: fractional 0..255 data built with exit 0 and scored 38.1% where 99.8% was due;
a 0..16 feature matrix was told to "divide the arrays by 255")."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from edgekit.converters import build
from edgekit.converters.inputs.checks import image_shaped, scales_pixels_itself
from onnx import TensorProto, helper, numpy_helper

from edgekit.errors import CalibrationError

from ..conftest import DIGITS_ONNX

FAST = {"target": "host", "formats": ["onnx"], "quiet": True}


def test_fractional_pixel_values_are_caught(tmp_path, digits_data):
    x, y = digits_data
    scaled = x * 255.0  # what a float resize of 8-bit pictures gives: 0..255 with fractions
    assert not np.all(scaled == np.round(scaled))
    np.savez(tmp_path / "pixels.npz", x=scaled, y=y)
    with pytest.raises(CalibrationError) as err:
        build(str(DIGITS_ONNX), calib=str(tmp_path / "pixels.npz"), output=tmp_path / "o.edgekit", **FAST)
    assert "divide the arrays by 255" in str(err.value) and "'scale = 1'" in str(err.value)
    assert not (tmp_path / "o.edgekit").exists()


def tabular_model(path, features: int = 64, classes: int = 10) -> None:
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.normal(0, 0.1, (features, classes)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["features", "w"], ["scores"])], "tabular",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["n", features])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", classes])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_tabular_counts_are_not_pixels(tmp_path):
    from sklearn.datasets import load_digits

    digits = load_digits()  # 64 whole-number features 0..16 per sample: a feature matrix
    tabular_model(tmp_path / "tab.onnx")
    np.savez(tmp_path / "tab.npz", features=digits.data[:256].astype(np.float32), y=digits.target[:256])
    result = build(str(tmp_path / "tab.onnx"), calib=str(tmp_path / "tab.npz"),
                   output=tmp_path / "tab.edgekit", accept_accuracy_drop=True, guard_time=0, **FAST)
    assert result.path.exists()


def test_image_shapes():
    assert image_shaped((540, 1, 8, 8)) and image_shaped((4, 224, 224, 3))
    assert not image_shaped((540, 64)) and not image_shaped((8, 16, 64)) and not image_shaped((2, 7, 1, 1))


def pixel_model(op: str, value: float) -> onnx.ModelProto:
    const = numpy_helper.from_array(np.array(value, np.float32), "k")
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
         helper.make_node(op, ["xf", "k"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3, 8, 8])], [const])
    return helper.make_model(graph)


def test_a_model_dividing_by_255_takes_pixels():
    assert scales_pixels_itself(pixel_model("Div", 255.0), "x")
    assert scales_pixels_itself(pixel_model("Mul", 1 / 255), "x")
    assert not scales_pixels_itself(pixel_model("Div", 0.5), "x")
    assert not scales_pixels_itself(pixel_model("Add", 255.0), "x")
    assert not scales_pixels_itself(onnx.load(str(DIGITS_ONNX)), "x")
