"""GRU and LSTM: written as float ops unrolled over the sequence inside the int8 graph
(LiteRT has no general integer kernel for them), named in ``float_ops``; the layers around
them stay int8. Digit images are read row by row as 8-step sequences of 8 features."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from ai_edge_litert.schema_py_generated import TensorType
from edgekit.converters.tflite import convert
from torch import nn

from . import nets
from .helpers import litert, ops_of, run_onnx, tensor
from .op_parity import build, check, digits

SHAPE = (1, 8, 8)  # [batch, time, features]


class Recurrent(nn.Module):
    def __init__(self, kind: str, bidirectional: bool, layers: int) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 12)
        self.rnn = getattr(nn, kind)(12, 16, num_layers=layers, batch_first=True,
                                     bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, 5)

    def forward(self, x):
        seq, _ = self.rnn(self.embed(x))
        return self.head(seq)


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
@pytest.mark.parametrize("bidirectional,layers", [(False, 1), (True, 2)], ids=["uni", "bi2"])
def test_recurrent_cell_is_float_inside_int8_and_matches_onnx(tmp_path, kind, bidirectional,
                                                               layers):
    path = build(Recurrent(kind, bidirectional, layers), SHAPE, tmp_path)
    model = check(path, kind, float_ok=True)
    floats = {o["op_type"] for o in model.float_ops}
    # only the cells: the Transpose/Reshape/Squeeze on their outputs move integer bytes
    # (recurrent_qdq.py), the linear layers are int8
    assert floats == {kind}, model.float_ops
    assert sum(o["op_type"] == kind for o in model.float_ops) == layers
    assert model.outputs[0]["dtype"] == "int8"
    assert model.op_counts["FULLY_CONNECTED"] >= 2 and "LOGISTIC" in model.op_counts
    # the DEQUANTIZE sits right before each cell and the QUANTIZE right after it
    assert model.op_counts["DEQUANTIZE"] == layers and model.op_counts["QUANTIZE"] == layers
    if layers == 2:  # between the cells the bytes are int16 at the |h| < 1 bound
        kinds = {tensor(model.data, o.outputs[0]).type for name, o in ops_of(model.data)
                 if name == "QUANTIZE"}
        assert TensorType.INT16 in kinds, kinds


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_float_unrolled_cell_equals_onnxruntime(tmp_path, kind):
    """The unrolled float arithmetic itself, without quantization in the way."""
    path = nets.export(nets.seeded(Recurrent(kind, True, 1)), SHAPE, tmp_path / "f.onnx")
    model = convert(onnx.load(str(path)))
    assert {o["op_type"] for o in model.float_ops} >= {kind}
    feed = digits(SHAPE, 8)
    got, want = litert(model).run(feed)[0], run_onnx(path, feed)[0]
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_recurrent_weights_are_written_once_not_per_time_step(tmp_path, kind):
    """ddddocr's bidirectional LSTM (32 steps, 2048x512 recurrent weights) made a 287 MB
    .tflite of a 26 MB model when each step wrote its own copy."""
    path = nets.export(nets.seeded(Recurrent(kind, True, 1)), SHAPE, tmp_path / "f.onnx")
    model = convert(onnx.load(str(path)))
    fc_weights = [op.inputs[1] for name, op in ops_of(model.data) if name == "FULLY_CONNECTED"]
    per_step = [i for i in fc_weights if tensor(model.data, i).shape[-1] == 16]  # h x R^T
    assert len(per_step) >= 2 * SHAPE[1]  # one per step and direction
    # a tensor per direction and weight (GRU: the z/r rows and the n rows), not per step
    assert len(set(per_step)) <= 4 < len(per_step), (len(set(per_step)), len(per_step))
