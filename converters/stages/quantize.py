"""Quantize: static int8 in QDQ form, per-channel weights, from the calibrated ranges.

One candidate per calibration method; the validate stage picks among them.
"""

from __future__ import annotations

import logging
from typing import Any

from ..context import BuildContext
from ..pipeline import Stage


class Quantize(Stage):
    name = "quantize"

    def __init__(self) -> None:
        self.used: dict[str, Any] = {}

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return self.used

    def run(self, ctx: BuildContext) -> None:
        from onnxruntime.quantization import (
            CalibrationMethod,
            QuantFormat,
            QuantType,
            quantize_static,
        )

        enums = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
                 "entropy": CalibrationMethod.Entropy}
        activation = QuantType.QUInt8 if ctx.activation_type == "uint8" else QuantType.QInt8
        keep_float = list(ctx.config.extra.get("keep_float", []))
        extra_options = {
            "WeightSymmetric": True,  # int8 weights, zero point 0: what integer kernels expect
            "ActivationSymmetric": ctx.activation_type == "int8",
        }
        logging.getLogger().setLevel(logging.ERROR)  # ORT logs a pre-processing hint per call
        for method, ranges in ctx.ranges.items():
            out = ctx.workdir / f"int8-{method}.onnx"
            quantize_static(
                str(ctx.float_path), str(out), None,
                quant_format=QuantFormat.QDQ, per_channel=ctx.config.per_channel,
                activation_type=activation, weight_type=QuantType.QInt8,
                nodes_to_exclude=keep_float, calibrate_method=enums[method],
                extra_options=extra_options, calibration_cache_path=str(ranges),
            )
            ctx.candidates[method] = out
        self.used = {"format": "QDQ", "per_channel": ctx.config.per_channel,
                     "activation_type": ctx.activation_type, "weight_type": "int8",
                     "keep_float": keep_float, "extra_options": extra_options}
        ctx.quantization.update(self.used)
