"""The peers' default int8: onnxruntime's ``quantize_static`` with per-channel int8 weights,
uint8 activations (U8S8), MinMax calibration and QDQ format, on the same 64 calibration samples
(an opset < 13 source is upgraded to 13 first, which per-channel QDQ needs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .evaluate import count, input_ranks, sample


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
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:  # per-channel QDQ needs opset 13 (ORT's docs): upgrade first, as edgekit does
        source = out.with_name(out.stem + ".opset13.onnx")
        onnx.save(version_converter.convert_version(model, 13), str(source))
    prepared = out.with_name(out.stem + ".pre.onnx")
    try:  # onnxruntime's recommended pre-processing; a model it cannot take goes in as is
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        given = prepared
    except Exception:
        given = source
    quantize_static(str(given), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
    return out
