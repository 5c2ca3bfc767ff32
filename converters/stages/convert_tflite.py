"""Convert TFLite: write the chosen int8 QDQ ONNX model as an integer .tflite (no TensorFlow).

Runs when the build's formats include "tflite". The model shares the ONNX model's
calibration, scales and float nodes; its I/O scales and layouts go into its models[] entry
so the LiteRT backend can quantize inputs and dequantize outputs. A short LiteRT-vs-
onnxruntime check on held-out samples is recorded under ``validation["tflite"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import InternalError, UnsupportedModelError

from ..context import BuildContext
from ..pipeline import Stage

MEMBER = "model.tflite"
CHECK_SAMPLES = 64  # held-out samples for the parity check (bounded: it adds build time)
FLOAT_STEP_SAMPLES = 4  # of those, the ones a float output's step is measured on


class ConvertTflite(Stage):
    name = "convert_tflite"
    requires = frozenset({"inputs", "outputs", "quant_path"})
    provides = frozenset({"model_bytes", "models", "validation"})

    def __init__(self) -> None:
        super().__init__()
        self.used: dict[str, Any] = {}

    def applies(self, ctx: BuildContext) -> bool:
        return "tflite" in ctx.formats

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return self.used

    def run(self, ctx: BuildContext) -> None:
        from edgekit.converters.tflite.shipped import tflite_entry, write_tflite

        keep_float = set(ctx.quantization.get("keep_float") or [])
        strict = bool(ctx.config.strict_int8)
        asked = ctx.config.formats is not None and "tflite" in ctx.config.formats
        optional = not (strict or asked)
        try:  # the bytes the accuracy decision judged (shipped.py writes each model once)
            model = write_tflite(ctx, ctx.quant_path, keep_float, self._ranges(ctx))
        except UnsupportedModelError as exc:
            if not optional:
                raise
            self._skip(ctx, str(exc))  # tflite came from the profile's preference only
            return
        if model.float_ops:
            names = ", ".join(f"{o['name']} ({o['op_type']})" for o in model.float_ops)
            ctx.warn(f"tflite: {len(model.float_ops)} op(s) run in float between "
                     f"DEQUANTIZE/QUANTIZE: {names}")
        entry = tflite_entry(ctx, model, MEMBER)
        try:
            check = self._check(ctx, entry, model)
        except Exception as exc:  # noqa: BLE001 - LiteRT refused the written model: a writer bug
            if not optional:
                raise InternalError(f"the written .tflite does not run on LiteRT: {exc}") from exc
            self._skip(ctx, f"the written .tflite does not run on LiteRT: {exc}")
            return
        ctx.model_bytes[MEMBER] = model.data
        ctx.models = [m for m in ctx.models if m["format"] != "tflite"] + [entry]
        ctx.validation["tflite"] = check
        self.used = {"strict_int8": strict, "io": entry["io"], "keep_float": sorted(keep_float),
                     "float_ops": len(model.float_ops), "bytes": len(model.data)}

    @staticmethod
    def _ranges(ctx: BuildContext) -> Path | None:
        """The chosen method's calibration cache: the ranges of outputs onnxruntime left float."""
        method = (ctx.validation or {}).get("method")
        path = ctx.ranges.get(method) if method else None
        if path is None and len(ctx.ranges) == 1:
            path = next(iter(ctx.ranges.values()))
        return path

    def _skip(self, ctx: BuildContext, why: str) -> None:
        """Ship ONNX only, and say why (the profile preferred tflite; nobody required it)."""
        ctx.warn(f"no .tflite in this artifact, shipping ONNX instead: {why}")
        if "onnx" not in ctx.formats:
            ctx.formats.append("onnx")
        self.used = {"skipped": why[:300]}

    @staticmethod
    def _float_step(ctx: BuildContext, name: str, sample: Any) -> float:
        """A float output's unit for the parity figure: what one step at its last int8 tensors
        moves it (``metrics/float_tail.py``, as verify counts it), on a few samples; 1e-6
        (exact float agreement) when it has no int8 boundary. Counted in 1e-6 a float
        recurrent state read 12.9% "within one step" where it was within one int8 step."""
        import onnx

        from ..metrics.float_tail import float_step

        few = sample.take(slice(0, FLOAT_STEP_SAMPLES))
        return float_step(onnx.load(str(ctx.quant_path)), name, few.feeds(0, len(few)),
                          few.axes) or 1e-6

    def _check(self, ctx: BuildContext, entry: dict[str, Any], model: Any) -> dict[str, Any]:
        """LiteRT vs onnxruntime int8 on a few held-out samples: the fraction of output
        elements within one quantization step, and top-1 accuracy when labels are known."""
        from edgekit.converters.core.runner import compare, run_dataset
        from edgekit.converters.tflite.shipped import run_tflite

        from edgekit.backends.litert import LiteRTBackend

        if not LiteRTBackend.available():
            ctx.warn("tflite: ai-edge-litert is not installed here; the .tflite is unchecked")
            return {"checked": False}
        if ctx.val is None or not len(ctx.val):
            return {"checked": False}
        sample = ctx.val.take(slice(0, CHECK_SAMPLES))
        want = run_dataset(ctx.quant_path, sample, exact_int8=True)
        got = run_tflite(ctx, model, sample)  # the decision's own LiteRT run when it judged these samples
        report: dict[str, Any] = {"checked": True, "samples": len(sample)}
        scales = entry["outputs_quantization"]
        for spec, a, b in zip(ctx.outputs, want, got, strict=True):
            step = scales.get(spec["name"], {}).get("scale") or self._float_step(
                ctx, spec["name"], sample)
            steps = np.abs(a.astype(np.float64) - b) / step
            report[spec["name"]] = {"within_1_step": float((steps <= 1.001).mean()),
                                    "max_steps": float(steps.max()),
                                    **({} if scales.get(spec["name"], {}).get("scale")
                                       else {"float_step": step})}
        metrics = compare(want[0], got[0], sample.labels)
        for key in ("top1_agreement", "accuracy_int8"):
            if key in metrics:
                report[key] = metrics[key]
        worst = min(v["within_1_step"] for v in report.values() if isinstance(v, dict))
        if worst < 0.99:
            ctx.warn(f"tflite: only {worst:.1%} of output elements within one quantization "
                     "step of the ONNX int8 model on held-out samples")
        return report
