"""SmoothQuant migration (tools/studies/smoothquant.py) on a minimal graph with Moonshine's encoder
structure: a decomposed LayerNorm whose gamma Mul feeds Shape and three MatMul projections, and
a GELU whose final ``* 0.5`` feeds a Gemm (transB) through a Reshape, as onnxruntime's
pre-processing leaves the MLP. One input channel is an outlier, as in the real encoder."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tools.studies.smoothquant import find_sites, smooth

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
T, C, H = 12, 16, 24  # frames, channels, MLP width


def _encoder_block(rng: np.random.Generator) -> onnx.ModelProto:
    gamma = np.ones(C, np.float32) + 0.1 * rng.standard_normal(C).astype(np.float32)
    gamma[3] = 40.0  # the outlier channel: LayerNorm's gamma makes it (as in trained encoders)
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("gamma", gamma), ("two", np.array(2.0, np.float32)), ("eps", np.array(1e-5, np.float32)),
        ("wq", rng.standard_normal((C, C)).astype(np.float32) * 0.2),
        ("wk", rng.standard_normal((C, C)).astype(np.float32) * 0.2),
        ("wv", rng.standard_normal((C, C)).astype(np.float32) * 0.2),
        ("w1", rng.standard_normal((C, H)).astype(np.float32) * 0.2),
        ("w2", rng.standard_normal((C, H)).astype(np.float32) * 0.2),  # [out, in] for transB
        ("b2", rng.standard_normal(C).astype(np.float32) * 0.1),
        ("sqrt2", np.array(np.sqrt(2.0), np.float32)), ("one", np.array(1.0, np.float32)),
        ("half", np.array(0.5, np.float32)),
        ("to2d", np.array([-1, H], np.int64)), ("to3d", np.array([1, T, C], np.int64))]]
    mk = helper.make_node
    nodes = [
        mk("ReduceMean", ["x"], ["mean"], "ln/ReduceMean", axes=[-1]),
        mk("Sub", ["x", "mean"], ["centred"], "ln/Sub"),
        mk("Pow", ["centred", "two"], ["sq"], "ln/Pow"),
        mk("ReduceMean", ["sq"], ["var"], "ln/ReduceMean_1", axes=[-1]),
        mk("Add", ["var", "eps"], ["var_eps"], "ln/Add"),
        mk("Sqrt", ["var_eps"], ["std"], "ln/Sqrt"),
        mk("Div", ["centred", "std"], ["normed"], "ln/Div"),
        mk("Mul", ["normed", "gamma"], ["ln_out"], "ln/Mul"),
        mk("Shape", ["ln_out"], ["ln_shape"], "attn/Shape"),
        mk("MatMul", ["ln_out", "wq"], ["q"], "attn/q_proj"),
        mk("MatMul", ["ln_out", "wk"], ["k"], "attn/k_proj"),
        mk("MatMul", ["ln_out", "wv"], ["v"], "attn/v_proj"),
        mk("Add", ["q", "k"], ["qk"], "attn/Add"),
        mk("Add", ["qk", "v"], ["attn"], "attn/Add_1"),
        mk("MatMul", ["attn", "w1"], ["h"], "mlp/fc1"),
        mk("Div", ["h", "sqrt2"], ["h_s"], "mlp/Div"),
        mk("Erf", ["h_s"], ["erf"], "mlp/Erf"),
        mk("Add", ["erf", "one"], ["erf1"], "mlp/Add"),
        mk("Mul", ["h", "erf1"], ["g0"], "mlp/Mul"),
        mk("Mul", ["g0", "half"], ["gelu"], "mlp/Mul_1"),
        mk("Reshape", ["gelu", "to2d"], ["gelu2d"], "mlp/Reshape"),
        mk("Gemm", ["gelu2d", "w2", "b2"], ["y2d"], "mlp/fc2", transB=1),
        mk("Reshape", ["y2d", "to3d"], ["y"], "mlp/Reshape_1"),
    ]
    graph = helper.make_graph(
        nodes, "encoder_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, C])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, T, C]),
         helper.make_tensor_value_info("ln_shape", TensorProto.INT64, [3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _run(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [session.run(["y"], f)[0] for f in feeds]


def _feeds(rng: np.random.Generator, n: int) -> list[dict[str, np.ndarray]]:
    return [{"x": rng.standard_normal((1, T, C)).astype(np.float32)} for _ in range(n)]


def test_the_site_is_the_layernorm_gamma_not_the_gelu_half() -> None:
    """GELU's scalar * 0.5 stays: the .tflite writer fuses the chain into one int8 lookup."""
    model = _encoder_block(np.random.default_rng(0))
    sites = {s.producer: set(s.readers) for s in find_sites(model)}
    assert sites == {"ln/Mul": {"attn/q_proj", "attn/k_proj", "attn/v_proj"}}


def test_a_per_channel_scale_before_a_reshape_and_gemm_is_a_site() -> None:
    """The MLP's fc2 reads through the Reshape onnxruntime's pre-processing puts before a Gemm."""
    model = _encoder_block(np.random.default_rng(0))
    half = next(i for i in model.graph.initializer if i.name == "half")
    half.CopyFrom(numpy_helper.from_array(np.full(H, 0.5, np.float32), "half"))
    sites = {s.producer: set(s.readers) for s in find_sites(model)}
    assert sites["mlp/Mul_1"] == {"mlp/fc2"}


def test_smoothing_keeps_the_float_function_and_narrows_the_outlier() -> None:
    rng = np.random.default_rng(1)
    model = _encoder_block(rng)
    calib, held_out = _feeds(rng, 8), _feeds(rng, 4)
    before = _run(model, held_out)
    half = next(i for i in model.graph.initializer if i.name == "half")
    half.CopyFrom(numpy_helper.from_array(np.full(H, 0.5, np.float32), "half"))
    before = _run(model, held_out)  # a per-channel 0.5: the same function, and a second site
    done = smooth(model, calib, alpha=0.5)
    onnx.checker.check_model(model, full_check=True)
    assert done["sites"] == 2
    assert done["spread_after"] < done["spread_before"] / 2
    for want, got in zip(before, _run(model, held_out), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_tensor_read_by_anything_but_a_product_is_left_alone() -> None:
    """Smoothing the LayerNorm output would change what an Add reading it computes."""
    model = _encoder_block(np.random.default_rng(2))
    model.graph.node.append(helper.make_node("Add", ["ln_out", "ln_out"], ["ln_twice"], "extra"))
    model.graph.output.append(helper.make_tensor_value_info("ln_twice", TensorProto.FLOAT, [1, T, C]))
    assert find_sites(model) == []
