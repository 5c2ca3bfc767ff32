"""Check the exported ONNX against torch on the calibration inputs, before anything is quantized.

An exporter can trace a model wrongly without failing (a data-dependent branch baked in by the
TorchScript tracer, an op lowered with other semantics). Quantizing such a graph would hide the
error inside int8 noise, so the build stops here when any output differs from torch by more than
``TOLERANCE`` of that output's scale (its largest magnitude over the inputs).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from edgekit.converters.core.runner import run_dataset, samples_first

from edgekit.errors import ExportError

from ..context import BuildContext
from ..pipeline import Stage

TOLERANCE = 1e-4  # max |onnx - torch| / max |torch| per output
TORCH_BATCH = 32


class CheckExport(Stage):
    name = "check_export"
    requires = frozenset({"calib", "inputs", "outputs"})
    provides = frozenset({"extra_manifest"})

    def __init__(self) -> None:
        super().__init__()
        self.result: dict[str, Any] = {}

    def applies(self, ctx: BuildContext) -> bool:
        return getattr(ctx, "torch_export", None) is not None

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return self.result

    def run(self, ctx: BuildContext) -> None:
        record = ctx.torch_export
        data = ctx.calib
        names = [i["name"] for i in ctx.inputs]
        onnx_outputs = run_dataset(record.onnx_path, data)
        torch_outputs = _torch_outputs(record.source, [data.arrays[n] for n in names],
                                       _batch(ctx.inputs),
                                       [int(o.get("batch_axis") or 0) for o in ctx.outputs])
        if len(torch_outputs) != len(onnx_outputs):
            raise ExportError(f"the exported ONNX has {len(onnx_outputs)} output(s); torch "
                              f"returns {len(torch_outputs)}")
        worst: dict[str, Any] = {"rel": -1.0}
        for spec, ref, got in zip(ctx.outputs, torch_outputs, onnx_outputs, strict=True):
            if ref.shape != got.shape:
                raise ExportError(f"output {spec['name']!r}: the exported ONNX gives shape "
                                  f"{list(got.shape)}, torch {list(ref.shape)}")
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
            scale = float(np.abs(ref).max()) if ref.size else 0.0
            index = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
            rel = float(diff.max()) / max(scale, 1e-12) if diff.size else 0.0
            if rel > worst["rel"]:
                worst = {"rel": rel, "output": spec["name"], "index": tuple(int(i) for i in index),
                         "abs": float(diff.max()) if diff.size else 0.0, "scale": scale,
                         "torch": float(ref[index]) if diff.size else 0.0,
                         "onnx": float(got[index]) if diff.size else 0.0}
        self.result = {"samples": len(data), "tolerance": TOLERANCE,
                       "max_rel_error": worst["rel"], "max_abs_error": worst["abs"],
                       "worst_output": worst["output"]}
        ctx.extra_manifest.setdefault("export", {})["check"] = dict(self.result)
        if worst["rel"] > TOLERANCE or not np.isfinite(worst["rel"]):
            sample, *position = worst["index"] or (0,)
            raise ExportError(
                f"the exported ONNX ({record.exporter} exporter) does not match torch on the "
                f"calibration inputs: largest mismatch at output {worst['output']!r} sample "
                f"{sample} position {position}: torch {worst['torch']:.6g} vs onnx "
                f"{worst['onnx']:.6g} (|err| {worst['abs']:.4g} = {worst['rel']:.2e} of the "
                f"output scale {worst['scale']:.4g}; allowed {TOLERANCE:g}). The trace does "
                "not represent the model: look for data-dependent branches or in-place state"
            )
        ctx.report(f"  export matches torch on {len(data)} samples "
                   f"(max error {worst['rel']:.2e} of output scale)")


def _batch(inputs: list[dict[str, Any]]) -> int:
    """Run torch at the ONNX model's fixed batch (1) or in chunks for a dynamic batch."""
    first = inputs[0]["shape"][0] if inputs and inputs[0]["shape"] else 1
    return first if isinstance(first, int) else TORCH_BATCH


def _torch_outputs(source: Any, arrays: list[np.ndarray], batch: int, axes: list[int]
                   ) -> list[np.ndarray]:
    """torch's outputs, joined and read samples first as ``run_dataset`` gives the ONNX's
    (``axes``: each output's batch axis)."""
    import torch

    from ..pytorch.inputs import flat_outputs, one_thread, run_model

    chunks: list[list[np.ndarray]] = []
    count = len(arrays[0])
    with torch.no_grad(), one_thread():
        for start in range(0, count, batch):
            args = tuple(torch.from_numpy(a[start:start + batch]) for a in arrays)
            leaves = flat_outputs(run_model(source, args))
            chunks.append([t.detach().float().numpy() for t in leaves])
    axes = axes if len(axes) == len(chunks[0]) else [0] * len(chunks[0])
    return samples_first(chunks, axes)
