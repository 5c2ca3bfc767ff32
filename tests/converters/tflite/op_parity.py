"""Harness for the per-op tests (test_ops_*.py): a tiny net with the op is exported,
quantized as the build does (calibrated on random and on real digit images), written as
.tflite, and LiteRT must match onnxruntime's int8 QDQ model within one quantization step on
every output element, on random inputs and on scikit-learn's digits.

The onnxruntime reference runs the QDQ graph with graph optimizations off: that evaluates
the int8 model exactly as written (each DQ -> op -> Q in float). With optimizations on,
onnxruntime fuses Q/DQ into its U8S8 integer kernels, which on x86 CPUs without VNNI
saturate 16-bit intermediate sums and drift by several steps on some elements; that is a
property of the host kernels, not of the int8 model both runtimes are given.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from edgekit.converters.tflite import TFLiteModel, convert

from . import nets
from .helpers import litert, quantize


def digits(shape: tuple[int, ...], count: int = 24) -> dict[str, np.ndarray]:
    """Real inputs: scikit-learn's 8x8 digit images scaled to [0, 1], laid into ``shape``
    (the 64 pixels repeated when the input holds more values than one image)."""
    from sklearn.datasets import load_digits

    images = load_digits().images[:count].reshape(count, -1).astype(np.float32) / 16.0
    size = int(np.prod(shape[1:]))
    rows = np.stack([np.resize(img, size) for img in images])
    return {"x": rows.reshape(count, *shape[1:]).astype(np.float32)}


def random(shape: tuple[int, ...], count: int = 16, seed: int = 2) -> dict[str, np.ndarray]:
    return nets.inputs(shape, count, seed=seed)


def build(net, shape: tuple[int, ...], workdir: Path, activation: str = "uint8") -> Path:
    """QDQ int8 model of a torch module (or an ONNX model with input ``x``), calibrated
    on random inputs and digit images."""
    if isinstance(net, onnx.ModelProto):
        src = workdir / "float.onnx"
        onnx.save(net, str(src))
    else:
        src = nets.export(nets.seeded(net), shape, workdir / "float.onnx")
    rand, real = random(shape, 16, seed=1)["x"], digits(shape, 16)["x"]
    return quantize(src, workdir, {"x": np.concatenate([rand, real])}, activation)


def reference(qdq_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime on the QDQ model as written (no graph optimizations), one row at a time."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(qdq_path), so, providers=["CPUExecutionProvider"])
    count = len(next(iter(feeds.values())))
    rows = [sess.run(None, {k: v[i:i + 1] for k, v in feeds.items()}) for i in range(count)]
    return [np.concatenate([r[j] for r in rows]) for j in range(len(rows[0]))]


def check(qdq_path: Path, op_type: str, float_ok: bool = False,
          feeds: list[dict[str, np.ndarray]] | None = None) -> TFLiteModel:
    """Convert, assert ``op_type`` is written in int8 (or, with ``float_ok``, named as a
    float op), and that every output element is within one step of onnxruntime on random
    and digit inputs. Returns the written model."""
    graph_ops = {n.op_type for n in onnx.load(str(qdq_path)).graph.node}
    assert op_type in graph_ops, f"{op_type} not in the quantized graph: {sorted(graph_ops)}"
    model = convert(onnx.load(str(qdq_path)))
    floats = {o["op_type"] for o in model.float_ops}
    if float_ok:
        assert op_type in floats, f"{op_type} should be named among the float ops {floats}"
    else:
        assert op_type not in floats, f"{op_type} left float: {model.float_ops}"
    shape = tuple(model.inputs[0]["shape"][i] for i in np.argsort(model.inputs[0]["perm"]))
    runner = litert(model)
    for feed in feeds or [random(shape), digits(shape)]:
        want, got = reference(qdq_path, feed), runner.run(feed)
        for info, a, b in zip(model.outputs, want, got, strict=True):
            assert a.shape == b.shape, f"{info['name']}: onnx {a.shape} vs tflite {b.shape}"
            step = info["quantization"]["scale"] if "quantization" in info else 1e-5
            steps = np.abs(a.astype(np.float64) - b) / step
            assert steps.max() <= 1.0 + 1e-3, (
                f"{info['name']}: {(steps > 1.001).mean():.2%} of elements beyond one step "
                f"(worst {steps.max():.1f})")
    return model
