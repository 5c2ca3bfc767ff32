"""The accuracy guard's ceiling (``search/autoguard.ceiling_items``) is what its float rung can
reach: every candidate AND every quantized weight restored. Before, it restored the candidates
only (activations, a few weights), so a model whose int8 weights alone miss the budget was
called hopeless although the float rung (whole nodes float, weights too) meets it: Moonshine's
encoder on representative calibration audio (docs/measurements/moonshine-int8.md)."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.search import restore
from edgekit.converters.search.autoguard import ceiling_items
from onnx import TensorProto, helper, numpy_helper

from .tflite.helpers import quantize, run_onnx

RNG = np.random.default_rng(3)


def _mlp() -> onnx.ModelProto:
    inits = [numpy_helper.from_array((RNG.standard_normal((16, 32)) * 0.3).astype(np.float32), "w1"),
             numpy_helper.from_array((RNG.standard_normal((32, 8)) * 0.3).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="act"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_the_ceiling_restores_the_weights_too_and_computes_float(tmp_path):
    x = RNG.standard_normal((33, 16)).astype(np.float32)
    qdq_path = quantize(_mlp(), tmp_path, {"x": x[:32]})
    float_path = tmp_path / "prepared.onnx"
    qdq, float_model = onnx.load(str(qdq_path)), onnx.load(str(float_path))
    found = restore.restorables(qdq, float_model)
    activations = [[r] for r in found.values() if r.kind == "activation"]
    assert activations and any(r.kind == "weight" for r in found.values())
    ceiling = tmp_path / "ceiling.onnx"
    ceiling.write_bytes(restore.restored(qdq, float_model, ceiling_items(qdq, float_model, activations)))
    feeds = {"x": x[32:]}
    want = run_onnx(float_path, feeds)[0]
    np.testing.assert_allclose(run_onnx(ceiling, feeds)[0], want, rtol=1e-5, atol=1e-5)
    # the candidates alone (what the ceiling was) still round the weights
    alone = tmp_path / "alone.onnx"
    alone.write_bytes(restore.restored(qdq, float_model, [r for g in activations for r in g]))
    assert np.abs(run_onnx(alone, feeds)[0] - want).max() > 1e-4


def test_a_larger_float_span_is_still_tried_after_a_smaller_one_was_too_slow():
    """More float nodes can be faster (Moonshine: 511 float nodes estimated 126 ms, 604 nodes
    45 ms); only int16 / fp16 grow slower with every node."""
    from edgekit.converters.search.autoguard import covers_a_slow_span

    slow = {"float": [{"a", "b"}], "int16": [{"a", "b"}]}
    assert not covers_a_slow_span(slow, "float", {"a", "b", "c"})
    assert covers_a_slow_span(slow, "int16", {"a", "b", "c"})
    assert not covers_a_slow_span(slow, "int16", {"a", "c"})
