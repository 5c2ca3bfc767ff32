"""Quantize: static int8 in QDQ form, per-channel weights, from the calibrated ranges.

One candidate per calibration method; the validate stage picks among them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import edgekit.converters.ptq.precision as precision

import edgekit.device.cpu

from ..context import BuildContext
from ..pipeline import Stage, StageConfig

# the quantize stage's own plain per-channel min-max model, kept when it is exactly the reference
# PTQ's call (stages/reference_ptq.py copies it instead of quantizing again)
PLAIN_MINMAX = "int8-minmax-plain.onnx"


@dataclass(frozen=True)
class QuantizeConfig(StageConfig):
    keep_float: tuple[str, ...] = ()  # node names left float (the accuracy guard's plan)
    per_channel: bool = True
    int16: tuple[str, ...] = ()  # nodes on int16 activations, int8 weights (ptq/precision.py)
    fp16: tuple[str, ...] = ()   # nodes left float with float16 weights (targets with fp16 arithmetic)
    bias_correct: bool = True  # empirical bias correction (ptq/bias_correct.py), kept if it pays
    adaround: float = 0.0  # seconds for AdaRound (ptq/adaround.py) per candidate; 0: off


@contextlib.contextmanager
def ort_quantization_quiet() -> Iterator[None]:
    """Drop onnxruntime quantization's own log records while in the block, nobody else's.

    ORT's quantizer logs through the root logger (``logging.warning(...)``: a pre-processing
    hint on every call), so the filter sits on the root logger and matches records by the
    file that logged them; records of other code, and of named loggers, pass. With no root
    handler, a NullHandler keeps ``logging.warning`` from installing a stderr handler for
    the rest of the process. Both are removed on the way out.
    """
    import onnxruntime.quantization as ortq

    folder = os.path.dirname(os.path.abspath(ortq.__file__)) + os.sep

    class FromOrtQuantization(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return not os.path.abspath(record.pathname).startswith(folder)

    root = logging.getLogger()
    only_ort = FromOrtQuantization()
    guard = logging.NullHandler() if not root.handlers else None
    named = logging.getLogger("onnxruntime.quantization")
    level = named.level
    root.addFilter(only_ort)
    if guard is not None:
        root.addHandler(guard)
    named.setLevel(logging.ERROR)
    try:
        yield
    finally:
        named.setLevel(level)
        root.removeFilter(only_ort)
        if guard is not None:
            root.removeHandler(guard)


def runs_here(ctx: BuildContext) -> bool:
    """The target is this machine (the ``host`` profile: its CPU is read at load time)."""
    return ctx.profile.cpu.arch in ("native", platform.machine())


class Quantize(Stage):
    name = "quantize"
    Config = QuantizeConfig
    config: QuantizeConfig
    requires = frozenset({"calib", "float_path", "ranges"})
    provides = frozenset({"candidates", "quantization"})

    def __init__(self) -> None:
        super().__init__()
        self.used: dict[str, Any] = {}

    def configure(self, ctx: BuildContext) -> QuantizeConfig:
        return QuantizeConfig(tuple(ctx.config.keep_float), ctx.config.per_channel,
                              bias_correct=ctx.config.bias_correct, adaround=ctx.config.adaround)

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return self.used

    def run(self, ctx: BuildContext) -> None:
        from edgekit.converters.ptq.int8_pool import pool_in_int8
        from onnxruntime.quantization import (
            CalibrationMethod,
            QuantFormat,
            QuantType,
            quantize_static,
        )

        enums = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
                 "entropy": CalibrationMethod.Entropy,
                 "pertensor": CalibrationMethod.MinMax}  # its ranges come from the cache file
        activation = QuantType.QUInt8 if ctx.activation_type == "uint8" else QuantType.QInt8
        keep_float = list(self.config.keep_float)
        keep_float += [n for n in self.config.fp16 if n not in keep_float]
        keep_float += [c for c in self._split_packed(ctx) if c not in keep_float]
        per_channel = self.config.per_channel
        extra_options = {
            "WeightSymmetric": True,  # int8 weights, zero point 0: what integer kernels expect
            "ActivationSymmetric": ctx.activation_type == "int8",
        }
        # x86 without VNNI saturates 8-bit weights in onnxruntime's fused kernels (edgekit/device/cpu.py):
        # a model that will run on this very CPU gets 7-bit weights, as onnxruntime's docs advise.
        # Read through the module: one place (edgekit.device.cpu) answers for every CPU decision.
        reduce_range = runs_here(ctx) and edgekit.device.cpu.u8s8_saturates()
        wide: dict[str, list[str]] = {}
        corrections: dict[str, dict[str, Any]] = {}
        rounded: dict[str, dict[str, Any]] = {}
        pools: dict[str, int] = {}
        for method, ranges in ctx.ranges.items():
            out = ctx.workdir / f"int8-{method}.onnx"
            with ort_quantization_quiet():
                quantize_static(
                    str(ctx.float_path), str(out), None,
                    quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=activation, weight_type=QuantType.QInt8,
                    nodes_to_exclude=keep_float, calibrate_method=enums[method],
                    extra_options=extra_options, calibration_cache_path=str(ranges),
                    reduce_range=reduce_range,
                )
            plain = ctx.workdir / PLAIN_MINMAX
            if method == "minmax" and per_channel and not keep_float and not reduce_range \
                    and ctx.activation_type == "uint8":
                plain.write_bytes(out.read_bytes())  # reference_ptq's very call: it reuses this
            else:
                plain.unlink(missing_ok=True)
            if self.config.adaround > 0:  # before bias correction, which then sees its rounding
                from edgekit.converters.ptq.adaround import adaround

                rounded[method] = adaround(out, ctx.float_path, ctx.calib, self.config.adaround,
                                           quiet=ctx.config.quiet)
            if self.config.bias_correct:
                from edgekit.converters.ptq.bias_correct import correct_if_it_pays

                corrections[method] = correct_if_it_pays(out, ctx.float_path, ctx.calib)
            # the guard's int16/fp16 rungs last: the corrections above work on the int8 graph
            wide = precision.apply(out, set(self.config.int16), set(self.config.fp16))
            pools[method] = pool_in_int8(out, set(keep_float))  # onnxruntime fuses them
            ctx.candidates[method] = out
        self.used = {"bias_correction": corrections, "calibration_samples": len(ctx.calib),
                     **({"adaround": rounded} if rounded else {}),
                     "format": "QDQ", "per_channel": per_channel,
                     "activation_type": ctx.activation_type, "weight_type": "int8",
                     "keep_float": keep_float, "extra_options": extra_options,
                     "reduce_range": reduce_range, "int8_global_pools": pools}
        if self.config.int16 or self.config.fp16:
            self.used["mixed_precision"] = wide
        ctx.quantization.update(self.used)

    def _split_packed(self, ctx: BuildContext) -> list[str]:
        """Concats joining packed outputs' branches, kept float so each branch has its own scale
        (``converters/ptq/split_packed.py``); found once per float model and reported."""
        from edgekit.converters.ptq.split_packed import find_packed_outputs

        found = [p.to_dict() for p in find_packed_outputs(ctx.float_path, ctx.calib)]
        if ctx.quantization.get("packed_outputs") != found:  # say it once, not on every guard rebuild
            for item in found:
                ctx.report(f"  {item['line']}")
        ctx.quantization["packed_outputs"] = found
        return [p["concat_kept_float"] for p in ctx.quantization["packed_outputs"] if p["concat_kept_float"]]
