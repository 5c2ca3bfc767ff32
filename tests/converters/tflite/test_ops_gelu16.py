"""GELU's erf chain on the accuracy guard's int16 rung (converters/ptq/precision.py) still
fuses into one GELU: the rung adds a second Q -> DQ pair where the int8 Erf output meets
the int16 Add, and a Relu (``...__relu``) on the one-sided 1 + erf. Before, the writer met a
bare Erf, which it has no converter for (LiteRT has no ERF): Moonshine's int16 candidates
could not be written, so the guard judged them on onnxruntime and an int16 choice would
have shipped ONNX. The fused GELU between int16 tensors is written on LiteRT 2.3's int16
GELU (no float op) and tracks onnxruntime's int16 QDQ within one output step (an earlier
note here said that kernel returned values unrelated to GELU; this parity check says it does
not, at these scales)."""

from __future__ import annotations

import shutil

import onnx
import torch.nn.functional as F  # noqa: N812 - the usual name
from edgekit.converters.ptq import precision
from torch import nn

from .helpers import parity
from .op_parity import build, digits

SHAPE = (1, 8, 16)


class GeluMlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x):
        return self.b(F.gelu(self.a(x)))


def test_gelu_chain_on_the_int16_rung_fuses_and_tracks_onnx(tmp_path):
    qdq = build(GeluMlp(), SHAPE, tmp_path)
    rung = tmp_path / "int16.onnx"
    shutil.copy(qdq, rung)
    everything = {n.name for n in onnx.load(str(qdq)).graph.node
                  if n.op_type not in ("QuantizeLinear", "DequantizeLinear")}
    assert precision.apply(rung, int16=everything, fp16=set())["int16"]
    types = [n.op_type for n in onnx.load(str(rung)).graph.node]
    assert "Erf" in types and any(n.name.endswith("__relu") for n in
                                  onnx.load(str(rung)).graph.node), types
    model, within, worst = parity(rung, digits(SHAPE))
    assert "ERF" not in model.op_counts and model.op_counts.get("GELU") == 1, model.op_counts
    assert model.float_ops == [], model.float_ops
    # (the fused GELU is exact where onnxruntime rounds erf, 1 + erf and the product)
    assert within[0] == 1.0 and worst[0] <= 1.001, (within, worst)


def test_a_gelu_int16_in_and_int8_out_runs_float(tmp_path):
    """The chain's last Mul left int8 (the rung stops there): LiteRT's GELU takes one type in
    and out, so the fused GELU is a float op, and still tracks onnxruntime."""
    qdq = build(GeluMlp(), SHAPE, tmp_path)
    graph = onnx.load(str(qdq)).graph
    last = [n.name for n in graph.node if n.op_type == "Mul"][-1:]  # the chain's x * (...), in order
    rung = tmp_path / "int16.onnx"
    shutil.copy(qdq, rung)
    everything = {n.name for n in graph.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear")}
    assert precision.apply(rung, int16=everything - set(last), fp16=set())["int16"]
    model, within, worst = parity(rung, digits(SHAPE))
    assert [o["op_type"] for o in model.float_ops] == ["Gelu"], model.float_ops
    assert within[0] > 0.95, (within, worst)
