"""fp16 weights: layers the guard moves to fp16 keep float activations and float16 weights, in
QDQ ONNX (a Cast from a float16 initializer) and in .tflite (FLOAT16 constants + DEQUANTIZE,
LiteRT's float16 quantization), and both runtimes agree."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.ptq.precision import apply, layer_precisions
from edgekit.converters.tflite import convert
from edgekit.converters.tflite.schema import TType
from onnx import TensorProto

from ..tflite.helpers import litert, ops_of, read_tflite, run_onnx
from .conftest import quantize

CONVS = {"node_conv2d", "node_conv2d_1"}


def test_fp16_layers_in_both_formats(outlier_qdq, tmp_path):
    path = quantize(outlier_qdq["float"], tmp_path / "fp16.onnx", outlier_qdq["calib"], sorted(CONVS))
    done = apply(path, set(), CONVS)
    assert done["fp16"] == sorted(CONVS)
    model = onnx.load(str(path))
    halves = [i for i in model.graph.initializer if i.data_type == TensorProto.FLOAT16]
    assert {h.name for h in halves} == {"features.0.weight__fp16", "features.2.weight__fp16"}
    assert not {"features.0.weight", "features.2.weight"} & {i.name for i in model.graph.initializer}
    layers = {e["name"]: e["precision"] for e in layer_precisions(model)}
    assert layers["node_conv2d"] == layers["node_conv2d_1"] == "fp16" and layers["node_linear"] == "int8"

    feeds = {"image": outlier_qdq["x"][:32]}
    written = convert(model, keep_float=CONVS)
    names = [name for name, _ in ops_of(written.data)]
    assert names[:4] == ["DEQUANTIZE", "CONV_2D", "DEQUANTIZE", "CONV_2D"]
    tensors = read_tflite(written.data).subgraphs[0].tensors
    dequantized = [op for name, op in ops_of(written.data) if name == "DEQUANTIZE"]
    assert all(tensors[op.inputs[0]].type == TType.FLOAT16 for op in dequantized)
    want = run_onnx(path, feeds)[0]
    got = litert(written).run(feeds)[0]
    step = written.outputs[0]["quantization"]["scale"]
    # same fp16 weights, float math in both: the int8 output differs by at most a rounding
    assert np.abs(want.astype(np.float64) - got).max() <= step * (1 + 1e-3)
    # and against the float model, fp16 weights cost far less than the int8 grid's step
    ref = run_onnx(outlier_qdq["float"], feeds)[0]
    assert np.abs(ref - want).mean() < step
