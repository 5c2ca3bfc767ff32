"""A float output computed from int8 layers is judged in the float step its int8 boundary
makes (squeezenet's guard-kept classifier, issue 16): a cross-ISA-sized difference passes,
a flipped int8 weight still fails, and a pure float graph keeps the tight rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgekit.converters.metrics.float_tail import float_step, int8_boundary
from edgekit.converters.metrics.tolerance import output_tolerance
from onnx import TensorProto, helper, numpy_helper

from edgekit.artifact.archive import TEST_VECTORS, encode_test_vectors, write_artifact
from edgekit.ops.verify import verify_artifact
from tests.edgekit.runtime_models import minimal_manifest

FEATURES, HIDDEN, CLASSES, COUNT = 8, 16, 4, 4


def int8_with_float_tail(quantized: bool = True, mid_bits: int = 8):  # noqa: ANN201 - onnx
    """x -> Q/DQ -> MatMul(int8 weights) -> Relu -> Q/DQ -> MatMul(float weights) -> out.
    Without ``quantized``: the same MatMuls in float, no Q/DQ (a pure float graph);
    ``mid_bits=16``: the middle Q/DQ in int16 (the guard's a16w8 rung)."""
    rng = np.random.default_rng(0)
    w1 = rng.integers(-127, 128, size=(FEATURES, HIDDEN)).astype(np.int8)
    w2 = rng.normal(size=(HIDDEN, CLASSES)).astype(np.float32)
    s_w1, s_in, s_mid = np.float32(0.01), np.float32(0.02), np.float32(0.05)
    zero = np.array(0, np.int8)
    mid_zero = np.array(0, np.int16 if mid_bits == 16 else np.int8)
    inits = [numpy_helper.from_array(w2, "w2")]
    if quantized:
        inits += [numpy_helper.from_array(w1, "w1_q"), numpy_helper.from_array(zero, "zero"),
                  numpy_helper.from_array(mid_zero, "mid_zero"),
                  numpy_helper.from_array(np.array(s_w1), "s_w1"),
                  numpy_helper.from_array(np.array(s_in), "s_in"),
                  numpy_helper.from_array(np.array(s_mid), "s_mid")]
        nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "zero"], ["x_q"]),
                 helper.make_node("DequantizeLinear", ["x_q", "s_in", "zero"], ["x_dq"]),
                 helper.make_node("DequantizeLinear", ["w1_q", "s_w1", "zero"], ["w1"]),
                 helper.make_node("MatMul", ["x_dq", "w1"], ["h"]),
                 helper.make_node("Relu", ["h"], ["h_relu"]),
                 helper.make_node("QuantizeLinear", ["h_relu", "s_mid", "mid_zero"], ["h_q"]),
                 helper.make_node("DequantizeLinear", ["h_q", "s_mid", "mid_zero"], ["h_dq"]),
                 helper.make_node("MatMul", ["h_dq", "w2"], ["out"])]
    else:
        inits.append(numpy_helper.from_array(w1.astype(np.float32) * s_w1, "w1"))
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
                 helper.make_node("Relu", ["h"], ["h_dq"]),
                 helper.make_node("MatMul", ["h_dq", "w2"], ["out"])]
    graph = helper.make_graph(
        nodes, "tail", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", FEATURES])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def pack(path: Path, model_bytes: bytes, x: np.ndarray, expected: np.ndarray,
         bounds: dict | None) -> Path:
    """An artifact whose test vectors store ``expected`` for ``x`` under ``bounds``."""
    manifest = minimal_manifest(
        inputs=[{"name": "x", "shape": ["N", FEATURES], "dtype": "float32"}],
        outputs=[{"name": "out", "shape": ["N", CLASSES], "dtype": "float32"}],
        model_bytes=len(model_bytes))
    manifest["test_vectors"] = {"path": TEST_VECTORS, "count": COUNT, "tolerance": 0}
    if bounds is not None:
        manifest["test_vectors"]["outputs"] = {"out": bounds}
    vectors = encode_test_vectors({"in/x": x, "out/onnx/out": expected.astype(np.float32)})
    write_artifact(path, manifest, {"model.onnx": model_bytes, TEST_VECTORS: vectors})
    return path


@pytest.fixture(scope="module")
def tail_case() -> tuple:
    from edgekit.converters.core.runner import session

    model = int8_with_float_tail()
    x = np.random.default_rng(1).uniform(-1, 1, size=(COUNT, FEATURES)).astype(np.float32)
    host = session(model.SerializeToString(), exact_int8=True).run(["out"], {"x": x})[0]
    step = float_step(model, "out", {"x": x})
    bounds = output_tolerance(host, step, layers=2).to_dict() | {"float_step": step}
    return model, x, host, step, bounds


def test_the_float_step_is_one_boundary_step_through_the_float_tail(tail_case: tuple) -> None:
    model, x, _, step, _ = tail_case
    assert int8_boundary(model, "out") == {"h_dq": "s_mid"}
    # all HIDDEN inputs one step (0.05) off through w2: between one weight's and the L1 sum's
    w2 = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "w2"))
    assert 0.05 * np.abs(w2).max() < step <= 0.05 * np.abs(w2).sum(axis=0).max() + 1e-6
    # an int16 tensor is not the boundary: the int8 rounding before it reaches the output
    assert int8_boundary(int8_with_float_tail(mid_bits=16), "out") == {"x_dq": "s_in"}
    # a pure float graph has no boundary: it keeps the tight relative tolerance
    assert float_step(int8_with_float_tail(quantized=False), "out", {"x": x}) == 0.0


def test_a_difference_within_the_float_step_passes_and_is_reported(
        tail_case: tuple, tmp_path: Path) -> None:
    model, x, host, step, bounds = tail_case
    signs = np.random.default_rng(2).choice([-1.0, 1.0], size=host.shape)
    shifted = host + 0.6 * step * signs  # what Arm kernels' one-step rounding can make of it
    report = verify_artifact(pack(tmp_path / "ok.edgekit", model.SerializeToString(), x,
                                  shifted, bounds))
    assert report.passed, report.lines()
    d = report.formats[0].distribution["out"]
    assert d["float_step"] == pytest.approx(step) and d["max"] <= 1.0
    assert "float output of int8 layers" in "\n".join(report.lines())
    # the same difference under the old float rule (1e-4 of the largest value) fails
    old = verify_artifact(pack(tmp_path / "old.edgekit", model.SerializeToString(), x,
                               shifted, None))
    assert not old.passed


def test_a_flipped_int8_weight_still_fails(tail_case: tuple, tmp_path: Path) -> None:
    from tools.studies.perturb_weight import perturb_onnx

    model, x, host, _, bounds = tail_case
    flipped, what = perturb_onnx(model.SerializeToString())
    assert "w1_q" in what
    report = verify_artifact(pack(tmp_path / "bad.edgekit", flipped, x, host, bounds))
    assert not report.passed
    assert any("steps >" in r for r in report.formats[0].failures), report.formats[0].failures
