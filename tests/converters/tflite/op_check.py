"""One op, checked end to end: a tiny torch net exported to ONNX, quantized as the build
does, written as .tflite, and run on LiteRT next to onnxruntime's int8 QDQ model, on random
inputs and on real ones (scikit-learn's digits images)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from edgekit.converters.tflite import TFLiteModel, convert
from torch import nn

from . import nets
from .helpers import litert, ops_of, quantize


def digits(shape: tuple[int, ...], count: int, offset: int = 0) -> dict[str, np.ndarray]:
    """``count`` real 8x8 digit images (pixel values 0..16 centred to [-2, 2]), each
    tiled or cut to fill one sample of ``shape``."""
    from sklearn.datasets import load_digits

    images = load_digits().data[offset:offset + count].astype(np.float32)
    size = int(np.prod(shape[1:]))
    reps = -(-size // images.shape[1])
    flat = np.tile((images - 8.0) / 4.0, (1, reps))[:, :size]
    return {"x": flat.reshape(count, *shape[1:])}


@dataclass
class OpResult:
    model: TFLiteModel
    within_random: float  # share of output elements within one step, random inputs
    within_digits: float  # same, real digit images
    worst: float  # largest difference in steps over both
    builtins: list[str]


def check_op(net: nn.Module, shape: tuple[int, ...], workdir: Path, seed: int = 0,
             activation: str = "uint8", reseed: bool = True) -> OpResult:
    """Quantize ``net`` (calibrated on random and digit inputs), convert, compare.
    ``reseed``: draw the net's parameters from ``seed`` first (else use them as they are)."""
    net = nets.seeded(net, seed) if reseed else net.eval()
    f = nets.export(net, shape, workdir / "float.onnx")
    rand = nets.inputs(shape, 16, seed=1)["x"]
    calib = {"x": np.concatenate([rand, digits(shape, 16, offset=500)["x"]])}
    qdq = quantize(f, workdir, calib, activation)
    model = convert(onnx.load(str(qdq)))
    within_r, worst_r = _compare(qdq, model, nets.inputs(shape, 32, seed=7))
    within_d, worst_d = _compare(qdq, model, digits(shape, 32))
    names = [name for name, _ in ops_of(model.data)]
    return OpResult(model, within_r, within_d, max(worst_r, worst_d), names)


def _compare(qdq: Path, model: TFLiteModel, feeds: dict[str, np.ndarray]
             ) -> tuple[float, float]:
    """(share of elements within one output step, worst difference in steps) over all
    outputs. onnxruntime runs the QDQ graph as written (basic optimizations): its extended
    level swaps in QLinearConv, whose u8s8 kernel saturates on CPUs without VNNI and puts
    that model several steps away from its own QDQ graph and from float."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(qdq), so, providers=["CPUExecutionProvider"])
    count = len(feeds["x"])
    want = [np.concatenate(rows) for rows in zip(
        *[sess.run(None, {"x": feeds["x"][i:i + 1]}) for i in range(count)], strict=True)]
    got = litert(model).run(feeds)
    within, worst = [], []
    for info, a, b in zip(model.outputs, want, got, strict=True):
        step = info["quantization"]["scale"] if "quantization" in info else 1e-6
        steps = np.abs(a.astype(np.float64) - b) / step
        within.append(float((steps <= 1.0 + 1e-3).mean()))
        worst.append(float(steps.max()))
    return min(within), max(worst)


def assert_int8_parity(result: OpResult, builtin: str, share: float = 0.99) -> None:
    """The op is written as ``builtin`` in int8, nothing is float, and LiteRT agrees with
    onnxruntime within one step on at least ``share`` of the elements."""
    assert result.model.float_ops == [], result.model.float_ops
    assert builtin in result.builtins, result.builtins
    assert "DEQUANTIZE" not in result.builtins, result.builtins
    assert result.within_random >= share, (result.within_random, result.worst)
    assert result.within_digits >= share, (result.within_digits, result.worst)


def op_output_steps(workdir: Path, shape: tuple[int, ...], op_type: str,
                    activation: str = "uint8") -> np.ndarray:
    """Differences, in steps of its int8 output, between LiteRT and onnxruntime at the
    output of the (first) ``op_type`` node itself, over random and digit inputs: what an op
    adds, before a following layer can turn one step into several. ``workdir``: where
    :func:`check_op` quantized the net."""
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    qdq = onnx.load(str(workdir / f"int8-{activation}.onnx"))
    node = next(n for n in qdq.graph.node if n.op_type == op_type)
    q = next(n for n in qdq.graph.node if n.input and n.input[0] == node.output[0])
    dq = next(n for n in qdq.graph.node if n.input and n.input[0] == q.output[0])
    qdq.graph.output.append(onnx.helper.make_tensor_value_info(
        dq.output[0], onnx.TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(qdq.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    model = convert(onnx.load(str(workdir / f"int8-{activation}.onnx")))
    it = Interpreter(model_content=model.data, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    tap = next(t for t in it.get_tensor_details() if t["name"] == node.output[0])
    scale, zp = tap["quantization"]
    perm = model.inputs[0]["perm"]
    steps = []
    for x in np.concatenate([nets.inputs(shape, 32, seed=7)["x"], digits(shape, 32)["x"]]):
        want = sess.run([dq.output[0]], {"x": x[None]})[0]
        s, z = inp["quantization"]
        it.set_tensor(inp["index"], np.clip(np.rint(x[None].transpose(perm) / s) + z,
                                            -128, 127).astype(np.int8))
        it.invoke()
        got = (it.get_tensor(tap["index"]).astype(np.float64) - zp) * scale
        want = want.transpose(perm) if want.ndim == len(perm) else want
        steps.append(np.abs(got - want).reshape(-1) / scale)
    return np.concatenate(steps)
