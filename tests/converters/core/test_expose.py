"""``core.expose``: intermediate tensors as graph outputs, run by name.

The graph: ``h = x + w`` (w an initializer), ``y = Relu(h)`` (the graph output), and
``z = If(c, then: h * 2, else: h)`` whose branches define ``doubled`` inside a subgraph."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from edgekit.converters.context import Dataset
from edgekit.converters.core import runner
from edgekit.converters.core.expose import (
    Probe,
    exposed_bytes,
    ort_defaults,
    unoptimized,
    values_over,
    with_outputs,
)
from onnx import TensorProto, helper, numpy_helper

from edgekit.errors import InternalError

W = np.array([1.0, -2.0], np.float32)


def model() -> onnx.ModelProto:
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    then = helper.make_graph([helper.make_node("Mul", ["h", "two"], ["doubled"])], "then", [],
                             [helper.make_tensor_value_info("doubled", TensorProto.FLOAT, None)],
                             [two])
    other = helper.make_graph([helper.make_node("Identity", ["h"], ["same"])], "else", [],
                              [helper.make_tensor_value_info("same", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"]),
         helper.make_node("If", ["c"], ["z"], then_branch=then, else_branch=other)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(W, "w")])
    out = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    out.ir_version = 8
    return out


def without_if() -> onnx.ModelProto:
    """The model without its If (and its condition input): a dataset feeds x alone."""
    plain = model()
    plain.graph.node.pop()
    plain.graph.output.pop()
    del plain.graph.input[1]
    return plain


X = np.array([[0.5, 1.0], [-3.0, 4.0], [2.0, 0.0]], np.float32)
FEEDS = {"x": X, "c": np.array(True)}


def test_an_intermediate_tensor_comes_back_by_name_and_the_source_is_untouched():
    source = model()
    before = source.SerializeToString()
    got = Probe(source, ["h"]).run(FEEDS)
    assert list(got) == ["h"] and np.array_equal(got["h"], X + W)
    assert source.SerializeToString() == before
    assert [o.name for o in with_outputs(source, ["h"]).graph.output] == ["y", "z", "h"]


def test_a_graph_output_asked_for_is_listed_once_and_returned():
    exposed = with_outputs(model(), ["y", "h", "y"])
    assert [o.name for o in exposed.graph.output] == ["y", "z", "h"]
    got = Probe(model(), ["y", "h"]).run(FEEDS)
    assert np.array_equal(got["y"], np.maximum(X + W, 0)) and np.array_equal(got["h"], X + W)


def test_only_lists_the_names_alone_in_their_order():
    exposed = with_outputs(model(), ["h", "y", "h"], only=True)
    assert [o.name for o in exposed.graph.output] == ["h", "y"]


def test_an_initializer_or_input_comes_back_as_given():
    got = Probe(model(), ["w", "x"], opener=ort_defaults).run(FEEDS)
    assert np.array_equal(got["w"], W) and np.array_equal(got["x"], X)


def test_a_tensor_inside_a_subgraph_is_a_typed_error_naming_it():
    with pytest.raises(InternalError, match=r"\['doubled'\] live in a subgraph"):
        with_outputs(model(), ["h", "doubled"])
    with pytest.raises(InternalError, match=r"\['nowhere'\] are no tensor of the graph"):
        exposed_bytes(model(), ["nowhere"])


def test_over_a_dataset_is_batched_samples_first_and_matches_one_run():
    data = Dataset({"x": np.repeat(X, 25, axis=0)})  # 75 samples: three runs of 32
    plain = without_if()
    got = Probe(plain, ["h"], opener=unoptimized).over(data)
    assert got["h"].shape == (75, 2) and np.array_equal(got["h"], np.repeat(X, 25, axis=0) + W)
    kept = values_over(plain, ["h", "y"], data, only=True)
    assert list(kept) == ["h", "y"]
    assert np.array_equal(kept["y"], np.maximum(kept["h"], 0))


def test_an_initializer_over_a_dataset_comes_back_once_not_once_per_batch():
    data = Dataset({"x": np.repeat(X, 25, axis=0)})  # three runs: onnxruntime returns w thrice
    assert np.array_equal(Probe(without_if(), ["w", "h"]).over(data)["w"], W)
    assert np.array_equal(values_over(without_if(), ["h", "w"], data)["w"], W)


def test_values_over_runs_the_same_copy_once(monkeypatch):
    plain = without_if()
    data = Dataset({"x": X})
    first = values_over(plain, ["h"], data)
    opened = []
    monkeypatch.setattr(runner, "session", lambda *a, **k: opened.append(1))
    again = values_over(plain, ["h"], data)
    assert opened == [] and np.array_equal(first["h"], again["h"])
