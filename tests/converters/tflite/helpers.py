"""Shared helpers for the tflite writer tests: make QDQ int8 ONNX models the way the build
does (quant_pre_process, then quantize_static per-channel), and compare LiteRT with
onnxruntime in quantization steps of each output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from edgekit.converters.stages.quantize import ort_quantization_quiet
from edgekit.converters.tflite import TFLiteModel, convert

from edgekit.backends.base import BackendOptions, TensorSpec
from edgekit.backends.litert import LiteRTBackend


def quantize(float_model: onnx.ModelProto | Path, workdir: Path, calib: dict[str, np.ndarray],
             activation: str = "uint8", keep_float: list[str] | None = None,
             per_channel: bool = True) -> Path:
    """QDQ int8 model (per-channel int8 weights, uint8 or int8 activations) of a float model."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    src = workdir / "float.onnx"
    if isinstance(float_model, onnx.ModelProto):
        onnx.save(float_model, str(src))
    else:
        src = Path(float_model)
    prepared, out = workdir / "prepared.onnx", workdir / f"int8-{activation}.onnx"
    try:
        quant_pre_process(str(src), str(prepared), skip_optimization=False)
    except Exception:  # symbolic shape inference fails on some exports; so does the build's
        quant_pre_process(str(src), str(prepared), skip_optimization=False,
                          skip_symbolic_shape=True)
    names = list(calib)
    count = len(calib[names[0]])

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.rows = iter(range(count))

        def get_next(self):
            i = next(self.rows, None)
            return None if i is None else {n: calib[n][i:i + 1] for n in names}

    # the build's own silencer: setting the root logger's level here leaked into later tests
    with ort_quantization_quiet():
        quantize_static(
            str(prepared), str(out), Reader(), quant_format=QuantFormat.QDQ,
            per_channel=per_channel, weight_type=QuantType.QInt8,
            activation_type=QuantType.QUInt8 if activation == "uint8" else QuantType.QInt8,
            nodes_to_exclude=keep_float or [],
            extra_options={"WeightSymmetric": True, "ActivationSymmetric": activation == "int8"},
        )
    return out


def run_onnx(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from edgekit.converters.core.runner import session

    # the int8 math exactly as written (unfused where this CPU's fused kernels saturate)
    sess = session(path, exact_int8=True)
    batch = next(iter(feeds.values())).shape[0]
    fixed = any(isinstance(i.shape[0], int) for i in sess.get_inputs())
    if fixed and batch > 1:
        rows = [sess.run(None, {k: v[i:i + 1] for k, v in feeds.items()}) for i in range(batch)]
        return [np.concatenate([r[j] for r in rows]) for j in range(len(rows[0]))]
    return sess.run(None, feeds)


def litert(model: TFLiteModel, threads: int = 1) -> LiteRTBackend:
    """A LiteRT backend for a converted model (manifest view = the ONNX graph's I/O)."""
    inputs = [TensorSpec(i["name"], tuple(_onnx_shape(i))) for i in model.inputs]
    outputs = [TensorSpec(o["name"], tuple(_onnx_shape(o))) for o in model.outputs]
    entry = {"format": "tflite", "inputs": model.inputs, "outputs": model.outputs}
    return LiteRTBackend(model.data, inputs, outputs, BackendOptions(threads=threads),
                         entry=entry)


def _onnx_shape(info: dict) -> list[int]:
    inv = np.argsort(info["perm"])
    return [info["shape"][i] for i in inv]


def parity(qdq_path: Path, feeds: dict[str, np.ndarray], **convert_options
           ) -> tuple[TFLiteModel, list[float], list[float]]:
    """Convert, run both runtimes; per output: fraction of elements within one
    quantization step and the largest difference in steps."""
    model = convert(onnx.load(str(qdq_path)), **convert_options)
    want = run_onnx(qdq_path, feeds)
    got = litert(model).run(feeds)
    within, worst = [], []
    for info, a, b in zip(model.outputs, want, got, strict=True):
        assert a.shape == b.shape, f"{info['name']}: onnx {a.shape} vs tflite {b.shape}"
        step = info["quantization"]["scale"] if "quantization" in info else 1e-6
        steps = np.abs(a.astype(np.float64) - b) / step
        within.append(float((steps <= 1.0 + 1e-3).mean()))
        worst.append(float(steps.max()))
    return model, within, worst


def read_tflite(data: bytes):
    """The written flatbuffer parsed back with the official schema (ModelT object tree)."""
    from ai_edge_litert import schema_py_generated as schema

    return schema.ModelT.InitFromPackedBuf(bytearray(data), 0)


def ops_of(data: bytes) -> list[tuple[str, object]]:
    """(BUILTIN_NAME, OperatorT) for every operator, in execution order."""
    from edgekit.converters.tflite.schema import op_name

    model = read_tflite(data)
    codes = model.operatorCodes
    return [(op_name(codes[o.opcodeIndex].builtinCode), o) for o in model.subgraphs[0].operators]


def tensor(data: bytes, index: int):
    return read_tflite(data).subgraphs[0].tensors[index]
