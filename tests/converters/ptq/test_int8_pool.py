"""The global pool of a QDQ classifier runs as onnxruntime's fused int8 pool
(converters/ptq/int8_pool.py), with the outputs it had in float, on real onnxruntime."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from edgekit.converters.ptq.int8_pool import pool_in_int8
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

RNG = np.random.default_rng(0)
DATA = RNG.random((16, 8, 6, 6)).astype(np.float32)


def classifier(path: Path, pool: str) -> Path:
    """Conv -> Relu -> global pool (as ``pool`` writes it) -> flatten -> Gemm."""
    opset = 13 if pool == "ReduceMean13" else 18
    w = numpy_helper.from_array(RNG.normal(0, 0.3, (16, 8, 3, 3)).astype(np.float32), "w")
    g = numpy_helper.from_array(RNG.normal(0, 0.3, (4, 16)).astype(np.float32), "g")
    inits = [w, g, numpy_helper.from_array(np.array([1, 16], np.int64), "shape")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu")]
    if pool == "GlobalAveragePool":
        nodes.append(helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"))
    elif pool == "ReduceMean13":
        nodes.append(helper.make_node("ReduceMean", ["r"], ["p"], name="pool", axes=[-2, -1]))
    else:  # opset 18: the axes are an input; "channels" averages over C, not a global pool
        axes = [1] if pool == "channels" else [2, 3]
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        nodes.append(helper.make_node("ReduceMean", ["r", "axes"], ["p"], name="pool",
                                      keepdims=1))
    width = 36 if pool == "channels" else 16
    inits[2] = numpy_helper.from_array(np.array([1, width], np.int64), "shape")
    if pool == "channels":
        inits[1] = numpy_helper.from_array(RNG.normal(0, 0.3, (4, 36)).astype(np.float32), "g")
    if pool == "squeeze-excite":  # the mean feeds a 1x1 conv: a Q already follows it
        inits.append(numpy_helper.from_array(
            RNG.normal(0, 0.3, (16, 16, 1, 1)).astype(np.float32), "se"))
        nodes.append(helper.make_node("Conv", ["p", "se"], ["p2"], name="excite"))
    nodes += [helper.make_node("Reshape", ["p2" if pool == "squeeze-excite" else "p", "shape"],
                               ["f"], name="flat"),
              helper.make_node("Gemm", ["f", "g"], ["y"], name="head", transB=1)]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    src, out = path / f"{pool}.onnx", path / f"{pool}.qdq.onnx"
    onnx.save(model, str(src))

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.rows = iter({"x": row[None]} for row in DATA)

        def get_next(self) -> dict | None:
            return next(self.rows, None)

    quantize_static(str(src), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    per_channel=True)
    return out


def run(path: Path, optimized: Path | None = None) -> np.ndarray:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if optimized is not None:
        so.optimized_model_filepath = str(optimized)
    session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"x": row[None]})[0] for row in DATA])


@pytest.mark.parametrize("pool", ["ReduceMean18", "ReduceMean13", "squeeze-excite"])
def test_the_global_pool_runs_fused_in_int8_with_the_same_outputs(tmp_path: Path,
                                                                  pool: str) -> None:
    qdq = classifier(tmp_path, pool)
    before = run(qdq, tmp_path / "before.opt.onnx")
    assert pool_in_int8(qdq) == 1
    after = run(qdq, tmp_path / "after.opt.onnx")
    ops = {name: Counter(n.op_type for n in onnx.load(str(tmp_path / name)).graph.node)
           for name in ("before.opt.onnx", "after.opt.onnx")}
    assert ops["before.opt.onnx"]["QLinearGlobalAveragePool"] == 0  # the float tail before
    assert ops["after.opt.onnx"]["QLinearGlobalAveragePool"] == 1
    assert ops["after.opt.onnx"]["ReduceMean"] == ops["after.opt.onnx"]["GlobalAveragePool"] == 0
    # one rounding of the pool's mean, at the scale its consumer quantized it to anyway
    step = float(np.abs(before).max()) / 64
    np.testing.assert_allclose(after, before, atol=step)
    assert (after.argmax(1) == before.argmax(1)).mean() >= 0.9


@pytest.mark.parametrize("pool", ["channels", "GlobalAveragePool"])
def test_other_means_and_quantized_pools_are_left_as_they_are(tmp_path: Path,
                                                              pool: str) -> None:
    # a mean over channels is no global pool; onnxruntime quantizes a GlobalAveragePool itself
    qdq = classifier(tmp_path, pool)
    text = qdq.read_bytes()
    assert pool_in_int8(qdq) == (pool == "GlobalAveragePool")  # int8 already, or not a pool
    assert qdq.read_bytes() == text


def test_a_kept_float_pool_is_left_float(tmp_path: Path) -> None:
    qdq = classifier(tmp_path, "ReduceMean18")
    text = qdq.read_bytes()
    assert pool_in_int8(qdq, keep_float={"pool"}) == 0
    assert qdq.read_bytes() == text
