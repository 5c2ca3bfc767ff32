"""Max/Min, comparisons with Where, Expand and L2 normalization (ReduceL2 -> Clip -> Expand ->
Div, as PyTorch exports ``F.normalize``) in int8: MAXIMUM/MINIMUM, GREATER/LESS + SELECT_V2,
BROADCAST_TO and L2_NORMALIZATION, each within one step of onnxruntime's int8 model on
random and real (digit) inputs, with no float op. Before these converters the writer had
none of the four ONNX ops and refused such graphs (the build then shipped ONNX only)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from .op_parity import build, check

SHAPE = (1, 1, 8, 8)


class MinMax(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.a, self.b = nn.Conv2d(1, 6, 3, padding=1), nn.Conv2d(1, 6, 3, padding=1)

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        y = torch.maximum(a, b) if self.kind == "max" else torch.minimum(a, b)
        return y * 0.5 + 0.25  # an int8 op after it: quantized on both sides


class Select(nn.Module):
    """``where(a > t, a, b)`` and ``where(a < b, ...)``: a comparison with a constant (written
    on the activation's grid) and one of two activations."""

    def __init__(self, against: str) -> None:
        super().__init__()
        self.against = against
        self.a, self.b = nn.Conv2d(1, 6, 3, padding=1), nn.Conv2d(1, 6, 3, padding=1)

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        cond = a > 0.1 if self.against == "const" else a < b
        return torch.where(cond, a, b) * 0.5 + 0.25


class ExpandMean(nn.Module):
    """A squeeze-excite style gate broadcast back over H and W by ``expand``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(1, 6, 3, padding=1)

    def forward(self, x):
        y = self.a(x)
        gate = y.mean((2, 3), keepdim=True).expand(-1, -1, 8, 8)
        return y + gate


class Normalize(nn.Module):
    """An embedding head: ``F.normalize`` over the features (rank 2) or the channels (NCHW)."""

    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where
        self.a = nn.Conv2d(1, 6, 3, padding=1)

    def forward(self, x):
        y = self.a(x)
        if self.where == "features":
            return F.normalize(y.flatten(1), dim=1) * 2.0 + 0.5
        return F.normalize(y, dim=1) * 2.0 + 0.5


@pytest.mark.parametrize("kind,op_type,builtin", [("max", "Max", "MAXIMUM"),
                                                   ("min", "Min", "MINIMUM")])
def test_max_min_are_int8_and_match_onnx(tmp_path, kind, op_type, builtin):
    model = check(build(MinMax(kind), SHAPE, tmp_path), op_type)
    assert model.float_ops == [] and model.op_counts.get(builtin) == 1, model.op_counts


@pytest.mark.parametrize("against,builtin", [("const", "GREATER"), ("activation", "LESS")])
def test_where_of_a_comparison_is_int8_and_matches_onnx(tmp_path, against, builtin):
    model = check(build(Select(against), SHAPE, tmp_path), "Where")
    assert model.float_ops == [], model.float_ops
    assert model.op_counts.get("SELECT_V2") == 1 and model.op_counts.get(builtin) == 1
    assert "DEQUANTIZE" not in model.op_counts, model.op_counts


def test_expand_is_int8_broadcast_and_matches_onnx(tmp_path):
    model = check(build(ExpandMean(), SHAPE, tmp_path), "Expand")
    assert model.float_ops == [] and model.op_counts.get("BROADCAST_TO") == 1, model.op_counts


# 6 channels: elements up to ~1, LiteRT's fixed 1/128 output grid is the graph's; 384
# features: elements near 0.05 on a finer grid, written on the int16 kernels instead
@pytest.mark.parametrize("where,builtin", [("features", "RSQRT"),
                                           ("channels", "L2_NORMALIZATION")])
def test_normalize_is_one_int8_l2_normalization(tmp_path, where, builtin):
    qdq = build(Normalize(where), SHAPE, tmp_path)
    model = check(qdq, "ReduceL2")
    assert model.float_ops == [], model.float_ops
    assert model.op_counts.get(builtin) == 1, model.op_counts
    assert not {"SQRT", "DIV", "DEQUANTIZE"} & set(model.op_counts), model.op_counts
