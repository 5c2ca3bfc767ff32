"""The peers' default int8: onnxruntime's ``quantize_static`` with per-channel int8 weights,
uint8 activations (U8S8), MinMax calibration and QDQ format, on the same 64 calibration samples
(an opset < 13 source is upgraded to 13 first, which per-channel QDQ needs). A graph with
``ai.onnx.ml`` ops or a ZipMap output (skl2onnx's) is given as the standard-op graph edgekit's
load stage makes of it (converters/graph/ml_ops.py, map_outputs.py): onnxruntime's quantizer
raises on those ("Failed to find proper ai.onnx domain"; "The truth value of an array with
more than one element is ambiguous" on the ZipMap)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .evaluate import count, input_ranks, sample


def standard_graph(model: object) -> bool:
    """Rewrite ``model`` in place as edgekit's load stage does (ZipMap output -> its tensor,
    ai.onnx.ml ops -> standard ops); True when anything changed."""
    from edgekit.converters.graph.map_outputs import unzip_map_outputs
    from edgekit.converters.graph.ml_ops import lower_ml_ops
    from edgekit.converters.graph.opset import merge_opset_imports

    if not any(n.domain == "ai.onnx.ml" for n in model.graph.node):  # type: ignore[attr-defined]
        return False
    merge_opset_imports(model)
    return bool(unzip_map_outputs(model) + lower_ml_ops(model))


def _flat_gemm_biases(path: Path) -> None:
    """A Gemm bias of shape [1, C] (skl2onnx's intercepts, fused by the pre-processing) as
    [C]: the same sums, and what quantize_static's per-channel bias check can read (on
    [1, C] it raises "The truth value of an array with more than one element is
    ambiguous", onnxruntime 1.32 qdq_quantizer._adjust_weight_scale_for_int32_bias)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    biases = {n.input[2] for n in model.graph.node if n.op_type == "Gemm" and len(n.input) > 2}
    changed = False
    for tensor in model.graph.initializer:
        if tensor.name in biases and len(tensor.dims) == 2 and tensor.dims[0] == 1:
            tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor).reshape(-1),
                                                    tensor.name))
            changed = True
    if changed:
        onnx.save(model, str(path))


def quantize_peer(source: Path, calib: dict[str, np.ndarray], axes: dict[str, int],
                  consts: dict[str, int], out: Path) -> Path:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    ranks = input_ranks(source)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.index = 0

        def get_next(self) -> dict[str, np.ndarray] | None:
            if self.index >= count(calib, axes):
                return None
            feeds = sample(calib, axes, ranks, self.index)
            feeds.update({k: np.array(v, np.int64) for k, v in consts.items() if k in ranks})
            self.index += 1
            return feeds

    import onnx
    from onnx import version_converter

    model = onnx.load(str(source))
    if standard_graph(model):  # quantize_static reads tensors of standard ops only
        source = out.with_name(out.stem + ".standard.onnx")
        onnx.save(model, str(source))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:  # per-channel QDQ needs opset 13 (ORT's docs): upgrade first, as edgekit does
        source = out.with_name(out.stem + ".opset13.onnx")
        onnx.save(version_converter.convert_version(model, 13), str(source))
    prepared = out.with_name(out.stem + ".pre.onnx")
    try:  # onnxruntime's recommended pre-processing; a model it cannot take goes in as is
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        given = prepared
        _flat_gemm_biases(prepared)
    except Exception:
        given = source
    quantize_static(str(given), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
    return out
