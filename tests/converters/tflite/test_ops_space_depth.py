"""YOLOX's Focus stem (four strided slices + channel concat, ddddocr's detector) in int8: the
build's own graph (onnxruntime's basic optimizations) holds it as SpaceToDepth + a channel
Gather, written as SPACE_TO_DEPTH + GATHER, within one step of onnxruntime's QDQ model. Before
the writer had SpaceToDepth the model fell back to ONNX (issue 30, finding 5). DepthToSpace
(a super-resolution upsampler's PixelShuffle, CRD order, and DCR) goes the same way."""

from __future__ import annotations

import onnx
import pytest
import torch
from torch import nn

from edgekit.errors import UnsupportedModelError

from .helpers import ops_of
from .op_check import assert_int8_parity, check_op


class Focus(nn.Module):
    """YOLOX's stem: every second pixel in four phases, stacked on channels, then a conv
    (on the model's float input: onnxruntime's quantizer leaves the movers float)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(12, 8, 3, padding=1)

    def forward(self, x):
        tl, bl = x[..., ::2, ::2], x[..., 1::2, ::2]
        tr, br = x[..., ::2, 1::2], x[..., 1::2, 1::2]
        return self.conv(torch.cat((tl, bl, tr, br), dim=1))


class Shuffle(nn.Module):
    """A sub-pixel upsampler (ESPCN): conv to 4x channels, PixelShuffle(2), conv."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(1, 8, 3, padding=1), nn.Conv2d(2, 4, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)

    def forward(self, x):
        return self.b(self.shuffle(self.a(x)))


def test_the_focus_stem_is_space_to_depth_in_int8(tmp_path) -> None:
    result = check_op(Focus(), (1, 3, 16, 16), tmp_path)
    qdq = onnx.load(str(tmp_path / "int8-uint8.onnx"))
    # what the pipeline writes: onnxruntime's fold made the stem SpaceToDepth + Gather
    assert {"SpaceToDepth", "Gather"} <= {n.op_type for n in qdq.graph.node}
    assert_int8_parity(result, "SPACE_TO_DEPTH")
    assert result.builtins[:2] == ["SPACE_TO_DEPTH", "GATHER"], result.builtins
    assert result.worst <= 1.0 + 1e-3  # moves bytes: no rounding of its own


def test_depth_to_space_is_int8_in_both_channel_orders(tmp_path) -> None:
    from edgekit.converters.tflite import convert

    from .op_check import _compare, digits

    result = check_op(Shuffle(), (1, 1, 8, 8), tmp_path)
    qdq_path = tmp_path / "int8-uint8.onnx"
    qdq = onnx.load(str(qdq_path))
    d2s = next(n for n in qdq.graph.node if n.op_type == "DepthToSpace")
    assert onnx.helper.get_attribute_value(d2s.attribute[0]) == b"CRD"  # PixelShuffle's
    assert_int8_parity(result, "DEPTH_TO_SPACE")
    assert "GATHER" in result.builtins  # CRD's channels put in DCR order first
    # the same graph in DCR order (another channel order, onnxruntime's result changes too)
    d2s.attribute[0].s = b"DCR"
    onnx.save(qdq, str(tmp_path / "dcr.onnx"))
    model = convert(qdq)
    assert model.float_ops == [] and "GATHER" not in [n for n, _ in ops_of(model.data)]
    within, worst = _compare(tmp_path / "dcr.onnx", model, digits((1, 1, 8, 8), 32))
    assert within >= 0.99, (within, worst)
    d2s.attribute[0].s = b"XYZ"
    with pytest.raises(UnsupportedModelError, match="expected DCR or CRD"):
        convert(qdq)
