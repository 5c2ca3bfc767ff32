"""Sigmoid/Tanh gates on vectors (a hand-written recurrent cell, as in the VAD) run on LiteRT's
int16 LOGISTIC/TANH: the int8 kernels round to their fixed 1/256 and 1/128 grids and a
QUANTIZE rounds again to the graph's scale, a step off onnxruntime's one rounding on some
elements, and a recurrence compounds those steps. On int16 the only rounding that matters is
the QUANTIZE back to int8, so LiteRT stays within one step of onnxruntime after six steps
(99.4-99.8% of elements, max 2; with the int8 kernels 96.1-96.5%, max 4)."""

from __future__ import annotations

import torch
from ai_edge_litert.schema_py_generated import TensorType
from torch import nn

from .helpers import ops_of, tensor
from .op_check import assert_int8_parity, check_op

STEPS, FEATURES, HIDDEN = 6, 8, 16
SHAPE = (1, STEPS * FEATURES)


class GatedCell(nn.Module):
    """h <- h * sigmoid(x W + h U) + tanh(x V + h R) * sigmoid(x P), unrolled over 6 steps."""

    def __init__(self) -> None:
        super().__init__()
        self.xz, self.hz = nn.Linear(FEATURES, HIDDEN), nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.xn, self.hn = nn.Linear(FEATURES, HIDDEN), nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.xi = nn.Linear(FEATURES, HIDDEN)
        self.embed = nn.Linear(STEPS * FEATURES, STEPS * FEATURES)

    def forward(self, x):
        x = self.embed(x)
        h = torch.tanh(self.xn(x[:, :FEATURES]))
        for t in range(1, STEPS):
            xt = x[:, t * FEATURES:(t + 1) * FEATURES]
            z = torch.sigmoid(self.xz(xt) + self.hz(h))
            n = torch.tanh(self.xn(xt) + self.hn(h))
            h = h * z + n * torch.sigmoid(self.xi(xt))
        return h


def test_vector_gates_run_on_int16_kernels_within_one_step(tmp_path):
    result = check_op(GatedCell(), SHAPE, tmp_path)
    assert_int8_parity(result, "LOGISTIC")
    gates = [(name, tensor(result.model.data, op.inputs[0]).type)
             for name, op in ops_of(result.model.data) if name in ("LOGISTIC", "TANH")]
    assert {"LOGISTIC", "TANH"} <= {name for name, _ in gates}
    assert all(kind == TensorType.INT16 for _, kind in gates), gates
    assert result.model.outputs[0]["dtype"] == "int8"
