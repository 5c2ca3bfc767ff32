"""A Clip whose bound is computed from the data, the top-dB clamp of a log-mel front end
(openWakeWord's melspectrogram.onnx: ``Clip(x, min=ReduceMax(x) - 80)``), is written as
MAXIMUM with a tensor operand. Before, the writer wanted constant bounds ("tensor ... must be
a constant for the tflite writer") and the model shipped ONNX only (issue 30, finding 6)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .helpers import litert, ops_of, quantize, run_onnx

SHAPE = (1, 1, 12, 8)
TOP_DB = 8.0


def top_db_clamp(before_clip: str = "Mul") -> onnx.ModelProto:
    """x -> Conv 1x1 -> Mul(10) (or Add(1)) -> y; out = Clip(y, min=ReduceMax(y) - TOP_DB),
    a graph-level max and a scalar bound, as the log-mel's dB clamp is exported."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(0, 1, (1, 1, 1, 1)).astype(np.float32) + 2, "w"),
             numpy_helper.from_array(np.array(10.0 if before_clip == "Mul" else 1.0,
                                              np.float32), "k"),
             numpy_helper.from_array(np.array(TOP_DB, np.float32), "top_db")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node(before_clip, ["c", "k"], ["y"], name="scale"),
             helper.make_node("ReduceMax", ["y"], ["peak"], keepdims=0, name="peak"),
             helper.make_node("Sub", ["peak", "top_db"], ["floor"], name="floor"),
             helper.make_node("Clip", ["y", "floor"], ["out"], name="clamp")]
    return _model(nodes, inits, "out")


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], out: str
           ) -> onnx.ModelProto:
    """An opset-13 model from ``x`` [SHAPE] to ``out`` [SHAPE]."""
    graph = helper.make_graph(
        nodes, "top_db", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, SHAPE)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _inputs(count: int, seed: int) -> np.ndarray:
    """Log-spectrum-like inputs: most values low, a few high, so the clamp bites."""
    rng = np.random.default_rng(seed)
    return (rng.exponential(0.6, size=(count, *SHAPE[1:])) - 1.5).astype(np.float32)


def _check(model_path, feeds: np.ndarray, keep_float: bool) -> None:
    from edgekit.converters.tflite import convert

    model = convert(onnx.load(str(model_path)))
    names = [name for name, _ in ops_of(model.data)]
    assert "MAXIMUM" in names, names
    clamp_float = any(op["op_type"] == "Clip" for op in model.float_ops)
    assert clamp_float == keep_float, model.float_ops
    assert model.float_ops == [] or keep_float
    want = run_onnx(model_path, {"x": feeds})[0]
    got = litert(model).run({"x": feeds})[0]
    floor = want.reshape(len(feeds), -1).min(axis=1)
    peak = want.reshape(len(feeds), -1).max(axis=1)
    assert np.all(peak - floor <= TOP_DB + 0.5)  # the clamp is exercised: within the window
    assert np.any(np.isclose(want, floor[:, None, None, None]).sum(axis=(1, 2, 3)) > 1)
    info = model.outputs[0]
    step = info["quantization"]["scale"] if "quantization" in info else 1e-5
    assert np.abs(got - want).max() <= step * (1.0 + 1e-3) + 1e-5, np.abs(got - want).max()


def test_a_computed_clip_bound_is_written_float_after_an_int8_head(tmp_path) -> None:
    # the guard keeps the dB tail float (oww_melspectrogram): the Clip runs float in LiteRT
    calib = {"x": _inputs(32, 1)}
    qdq = quantize(top_db_clamp(), tmp_path, calib,
                   keep_float=["scale", "peak", "floor", "clamp"])
    _check(qdq, _inputs(16, 2), keep_float=True)


def int8_top_db_clamp() -> onnx.ModelProto:
    """The clamp in int8 QDQ form, every tensor on one grid: x -> Q/DQ -> Add(1) -> Q/DQ -> y;
    floor = Q/DQ(Sub(Q/DQ(ReduceMax(x)), TOP_DB)); out = Q/DQ(Clip(y, floor)). The Add's only
    reader is the Clip, so the writer asks whether the Clip fuses into it as an activation."""
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(np.array(0.1, np.float32), "s_const"),
             numpy_helper.from_array(np.array(10, np.int8), "one_q"),  # 1.0
             numpy_helper.from_array(np.array(int(TOP_DB * 10), np.int8), "top_db_q")]

    def qdq(name: str) -> list[onnx.NodeProto]:
        return [helper.make_node("QuantizeLinear", [name, "s", "z"], [f"{name}_q"]),
                helper.make_node("DequantizeLinear", [f"{name}_q", "s", "z"], [f"{name}_dq"])]

    nodes = [helper.make_node("DequantizeLinear", ["one_q", "s_const", "z"], ["one"]),
             helper.make_node("DequantizeLinear", ["top_db_q", "s_const", "z"], ["top_db"]),
             *qdq("x"), helper.make_node("Add", ["x_dq", "one"], ["y"], name="shift"), *qdq("y"),
             helper.make_node("ReduceMax", ["x_dq"], ["peak"], keepdims=0, name="peak"),
             *qdq("peak"), helper.make_node("Sub", ["peak_dq", "top_db"], ["floor"], name="floor"),
             *qdq("floor"), helper.make_node("Clip", ["y_dq", "floor_dq"], ["out"], name="clamp"),
             *qdq("out")]
    return _model(nodes, inits, "out_dq")


def test_a_computed_clip_bound_is_int8_where_the_graph_quantizes_it(tmp_path) -> None:
    path = tmp_path / "int8.onnx"
    onnx.save(int8_top_db_clamp(), str(path))
    _check(path, _inputs(16, 2), keep_float=False)
