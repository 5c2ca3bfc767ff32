"""NCHW -> NHWC layout cases: flatten before a fully connected layer, concat on the channel
axis, pad, and nearest/bilinear resize; each also checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from . import nets
from .helpers import ops_of, parity, read_tflite, tensor

SHAPE = (1, 4, 6, 6)


def _convert(qdq_models, case: str, activation: str = "uint8"):
    path = qdq_models(f"layout_{case}", nets.LayoutNet(case), SHAPE, activation)
    model, within, worst = parity(path, nets.inputs(SHAPE, 16, seed=3))
    assert within[0] >= 0.99, f"{case}: {within[0]:.2%} within one step (worst {worst[0]:.1f})"
    assert model.float_ops == []
    return path, model


def test_image_input_is_nhwc_int8(qdq_models):
    _, model = _convert(qdq_models, "concat")
    (info,) = model.inputs
    assert info["layout"] == "NHWC" and info["shape"] == [1, 6, 6, 4]
    assert info["dtype"] == "int8" and -128 <= info["quantization"]["zero_point"] <= 127


def test_flatten_before_fc_permutes_weights_instead_of_transposing(qdq_models):
    path, model = _convert(qdq_models, "flatten_fc")
    onnx_ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert "Gemm" in onnx_ops and onnx_ops & {"Flatten", "Reshape"}
    names = [name for name, _ in ops_of(model.data)]
    assert "TRANSPOSE" not in names
    # the reshape reads the conv's NHWC output directly
    assert names.index("RESHAPE") == names.index("CONV_2D") + 1
    assert names[-1] == "FULLY_CONNECTED"


def test_concat_on_channels_uses_the_nhwc_channel_axis(qdq_models):
    _, model = _convert(qdq_models, "concat")
    (concat,) = [op for name, op in ops_of(model.data) if name == "CONCATENATION"]
    assert concat.builtinOptions.axis == 3
    assert model.outputs[0]["layout"] == "NHWC" and model.outputs[0]["shape"] == [1, 6, 6, 14]


def test_pad_is_written_in_nhwc_order(qdq_models):
    path, model = _convert(qdq_models, "pad")
    assert "Pad" in {n.op_type for n in onnx.load(str(path)).graph.node}
    (pad,) = [op for name, op in ops_of(model.data) if name == "PAD"]
    paddings = tensor(model.data, pad.inputs[1])
    buffer = read_tflite(model.data).buffers[paddings.buffer].data
    values = np.frombuffer(bytes(buffer), np.int32).reshape(4, 2)
    # F.pad(x, (2, 1, 0, 3)): W gets (2, 1), H gets (0, 3); NHWC order is N, H, W, C
    assert values.tolist() == [[0, 0], [0, 3], [2, 1], [0, 0]]


@pytest.mark.parametrize("case,builtin,half_pixel", [
    ("resize_nearest", "RESIZE_NEAREST_NEIGHBOR", False),
    ("resize_bilinear", "RESIZE_BILINEAR", True),
])
def test_resize_maps_coordinate_modes(qdq_models, case, builtin, half_pixel):
    _, model = _convert(qdq_models, case)
    (op,) = [op for name, op in ops_of(model.data) if name == builtin]
    assert op.builtinOptions.halfPixelCenters is half_pixel
    assert op.builtinOptions.alignCorners is False
