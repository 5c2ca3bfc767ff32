"""Pinning symbolic input dims: the estimator's policy (batch, then ones) and the strict one
(batch only), both through onnxruntime's make_input_shape_fixed."""

from __future__ import annotations

import onnx
import pytest
from edgekit.converters.graph.shapes import fixed_input_shapes
from onnx import TensorProto, helper

from edgekit.errors import UnsupportedModelError


def model(shape: list[int | str]) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    mid = helper.make_tensor_value_info("mid", TensorProto.FLOAT, shape)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["mid"]),
                               helper.make_node("Relu", ["mid"], ["y"])], "g", [x], [y],
                              value_info=[mid])
    return helper.make_model(graph)


def dims(vi: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param
            for d in vi.type.tensor_type.shape.dim]


def test_every_open_dim_is_pinned_and_a_named_one_everywhere() -> None:
    source = model(["N", 3, "H", 8])
    fixed = fixed_input_shapes(source, batch=4, others=1)
    assert dims(fixed.graph.input[0]) == [4, 3, 1, 8]
    # the named dims are replaced through the graph, not only on the input
    assert dims(fixed.graph.value_info[0]) == dims(fixed.graph.output[0]) == [4, 3, 1, 8]
    assert dims(source.graph.input[0]) == ["N", 3, "H", 8]  # the source is never modified


def test_the_strict_policy_pins_the_batch_and_names_any_other_open_dim() -> None:
    assert dims(fixed_input_shapes(model(["N", 3]), 1, others=None).graph.input[0]) == [1, 3]
    with pytest.raises(UnsupportedModelError, match="input 'x' axis 2 is symbolic \\('H'\\); "
                                                    "the tflite writer supports a symbolic batch"):
        fixed_input_shapes(model(["N", 3, "H"]), 1, others=None, who="the tflite writer")
