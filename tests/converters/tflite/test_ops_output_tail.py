"""Model outputs onnxruntime leaves float (a classifier ending ReduceMean -> Reshape after the
last Conv) get their calibrated scale in the .tflite (tflite/output_qdq.py): the tail is int8
and LiteRT stays within one step of onnxruntime's QDQ model, whose tail runs in float."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from edgekit.converters.tflite import convert
from torch import nn

from . import nets
from .helpers import quantize
from .op_check import _compare, digits


class PooledHead(nn.Module):
    """SqueezeNet's end: a conv, ReLU, global average pool as x.mean((2, 3)), then flatten."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(1, 8, 3), nn.Conv2d(8, 10, 1)

    def forward(self, x):
        return self.b(self.a(x)).relu().mean((2, 3)).reshape(x.shape[0], -1)


def test_float_tail_of_an_output_is_written_int8_at_its_calibrated_scale(tmp_path):
    shape = (1, 1, 8, 8)
    src = nets.export(nets.seeded(PooledHead()), shape, tmp_path / "float.onnx")
    calib = {"x": np.concatenate([nets.inputs(shape, 16, seed=1)["x"],
                                  digits(shape, 16, offset=500)["x"]])}
    qdq = quantize(src, tmp_path, calib)
    tail = [n.op_type for n in onnx.load(str(qdq)).graph.node][-2:]
    assert tail == ["ReduceMean", "Reshape"], tail  # onnxruntime left them float
    sess = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    out = np.concatenate([sess.run(None, {"x": row[None]})[0] for row in calib["x"]])
    ranges = {"out0": (float(out.min()), float(out.max()))}

    without = convert(onnx.load(str(qdq)))
    assert {o["op_type"] for o in without.float_ops} == {"ReduceMean", "Reshape"}
    model = convert(onnx.load(str(qdq)), output_ranges=ranges)
    assert model.float_ops == [], model.float_ops
    assert "quantization" in model.outputs[0]
    for feeds in (nets.inputs(shape, 32, seed=7), digits(shape, 32)):
        # (values past the calibrated range clip, as at any int8 tensor: no bound on the worst)
        within, worst = _compare(qdq, model, feeds)
        assert within >= 0.99, (within, worst)


def test_an_output_after_a_float_op_is_left_float(tmp_path):
    shape = (1, 1, 8, 8)
    src = nets.export(nets.seeded(PooledHead()), shape, tmp_path / "float.onnx")
    qdq = quantize(src, tmp_path, nets.inputs(shape, 8, seed=1))
    graph = onnx.load(str(qdq)).graph
    mean = next(n.name for n in graph.node if n.op_type == "ReduceMean")
    model = convert(onnx.load(str(qdq)), keep_float={mean}, output_ranges={"out0": (-1.0, 1.0)})
    assert "quantization" not in model.outputs[0]  # no pair after a kept-float op
    assert {o["op_type"] for o in model.float_ops} == {"ReduceMean", "Reshape"}
