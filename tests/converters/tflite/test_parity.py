"""LiteRT running the written .tflite matches onnxruntime running the QDQ int8 ONNX model:
within one quantization step on >= 99% of output elements, on the digits CNN (real data,
through the build), a MobileNetV2-size net and a net with every covered op."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import edgekit
from edgekit.artifact.archive import read_artifact

from . import nets
from .helpers import parity, quantize


def test_digits_tflite_matches_onnx_int8_and_keeps_accuracy(digits_artifact, digits_data):
    x, y = digits_data
    manifest = read_artifact(digits_artifact).manifest
    entry = next(m for m in manifest["models"] if m["format"] == "tflite")
    assert entry["float_ops"] == [] and entry["inputs"][0]["layout"] == "NHWC"
    with edgekit.load(digits_artifact, backend="litert") as lite, \
            edgekit.load(digits_artifact, backend="onnxruntime") as ort:
        got, want = lite.predict(x), ort.predict(x)
    step = entry["outputs_quantization"][manifest["outputs"][0]["name"]]["scale"]
    within = (np.abs(got - want) <= step * 1.001).mean()
    assert within >= 0.99, f"only {within:.2%} of logits within one step"
    acc_tflite, acc_onnx = (got.argmax(1) == y).mean(), (want.argmax(1) == y).mean()
    assert abs(acc_tflite - acc_onnx) <= 0.005, (acc_tflite, acc_onnx)
    assert acc_tflite >= 0.95
    check = manifest["validation"]["tflite"]
    assert check["checked"] and check["top1_agreement"] >= 0.99


@pytest.fixture(scope="module")
def mobilenetv2_qdq(tmp_path_factory):
    import zoo  # tools/zoo via tests/conftest.py: a broken zoo must fail, not skip
    work = tmp_path_factory.mktemp("mobilenetv2")
    path = zoo.export_onnx(zoo.mobilenetv2_like(), zoo.example_input("mobilenetv2_like"),
                           work / "float.onnx")
    rng = np.random.default_rng(0)
    calib = {"input": rng.standard_normal((4, 3, 224, 224)).astype(np.float32)}
    return quantize(path, work, calib, "uint8")


def test_mobilenetv2_size_net_matches_onnx_int8(mobilenetv2_qdq):
    rng = np.random.default_rng(1)
    feeds = {"input": rng.standard_normal((4, 3, 224, 224)).astype(np.float32)}
    model, within, worst = parity(mobilenetv2_qdq, feeds)
    assert within[0] >= 0.99, f"{within[0]:.2%} within one step (worst {worst[0]:.1f} steps)"
    # all integer: no float fallback, depthwise convolutions kept depthwise, one MEAN
    assert model.float_ops == []
    assert model.op_counts["DEPTHWISE_CONV_2D"] == 17 and model.op_counts["MEAN"] == 1
    assert "DEQUANTIZE" not in model.op_counts and "TRANSPOSE" not in model.op_counts
    # int8 weights: about a quarter of the float model (and no bigger than the int8 ONNX)
    float_bytes = (mobilenetv2_qdq.parent / "float.onnx").stat().st_size
    assert len(model.data) < 0.3 * float_bytes
    assert len(model.data) <= 1.01 * mobilenetv2_qdq.stat().st_size


EVERY_OP_BUILTINS = {
    "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL", "LOGISTIC", "HARD_SWISH",
    "MAX_POOL_2D", "AVERAGE_POOL_2D", "MEAN", "RESHAPE", "CONCATENATION", "SOFTMAX",
    "MIRROR_PAD", "PAD", "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR", "TRANSPOSE",
    "STRIDED_SLICE", "SPLIT",
}


@pytest.mark.parametrize("activation,dynamo", [("uint8", True), ("int8", False)],
                         ids=["uint8-dynamo", "int8-torchscript"])
def test_every_covered_op_matches_onnx_int8(qdq_models, activation, dynamo):
    shape = (1, 3, 32, 32)
    path = qdq_models("every_op", nets.EveryOp(), shape, activation, outputs=2, dynamo=dynamo)
    onnx_ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"Conv", "Gemm", "MatMul", "Add", "Mul", "Sigmoid", "MaxPool", "AveragePool",
            "Concat", "Softmax", "Pad", "Resize", "Transpose"} <= onnx_ops
    model, within, worst = parity(path, nets.inputs(shape, 32, seed=2))
    assert model.float_ops == []
    assert EVERY_OP_BUILTINS <= set(model.op_counts), EVERY_OP_BUILTINS - set(model.op_counts)
    for name, frac, steps in zip(("probabilities", "features"), within, worst, strict=True):
        assert frac >= 0.99, f"{name}: {frac:.2%} within one step (worst {steps:.1f})"
    # the 4-D output comes back in the ONNX layout (NCHW), the model holds it as NHWC
    assert model.outputs[1]["layout"] == "NHWC"
    if not dynamo:  # symmetric int8 keeps Relu/Clip in the graph: they become fused
        assert {"Relu", "Clip"} <= onnx_ops and "RELU" not in model.op_counts


def test_more_ops_match_onnx_int8(qdq_models):
    shape = (1, 3, 9, 9)
    path = qdq_models("more_ops", nets.MoreOps(), shape, "int8", outputs=3, dynamo=False)
    model, within, worst = parity(path, nets.inputs(shape, 32, seed=2))
    for frac, steps in zip(within, worst, strict=True):
        assert frac >= 0.99, f"{frac:.2%} within one step (worst {steps:.1f})"
    assert {o["op_type"] for o in model.float_ops} == {"Tanh", "Sub"}
    assert {"LEAKY_RELU", "MAXIMUM", "MINIMUM", "BATCH_MATMUL", "SPLIT_V", "REDUCE_MAX",
            "AVERAGE_POOL_2D", "MAX_POOL_2D", "FULLY_CONNECTED"} <= set(model.op_counts)
