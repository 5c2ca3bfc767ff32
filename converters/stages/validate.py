"""Validate: compare each int8 candidate with the float model on held-out data; keep the best.

Best = highest int8 accuracy when labels are known, else highest mean cosine similarity
of the outputs (ties: lowest max abs error).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..context import BuildContext
from ..pipeline import Stage
from ..qdq import float_nodes, input_quantization, output_quantization
from ..runner import compare, run_dataset


def score(metrics: dict[str, float]) -> tuple[float, float, float]:
    return (metrics.get("accuracy_int8", 0.0), metrics["cosine"], -metrics["max_abs_error"])


def annotate_io(ctx: BuildContext, model: Any) -> None:
    """Record the int8 graph's input and output quantization in the manifest's I/O specs:
    the input grid lets test vectors be stored as integers, the output step is the
    tolerance every format is verified against."""
    for specs, found in ((ctx.inputs, input_quantization(model)),
                         (ctx.outputs, output_quantization(model))):
        for spec in specs:
            if spec["name"] in found:
                spec["quantization"] = found[spec["name"]]
            else:
                spec.pop("quantization", None)


class Validate(Stage):
    name = "validate"
    requires = frozenset({"candidates", "float_path", "inputs", "outputs", "val"})
    provides = frozenset({"inputs", "outputs", "quant_path", "quantization", "validation"})

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return {"samples": ctx.validation.get("samples"), "chosen": ctx.validation.get("method")}

    def run(self, ctx: BuildContext) -> None:
        import onnx

        reference = run_dataset(ctx.float_path, ctx.val)
        labels = ctx.val.labels
        table: dict[str, dict[str, float]] = {}
        for method, path in ctx.candidates.items():
            outputs = run_dataset(path, ctx.val, exact_int8=True)
            # the first output decides; the others are reported too
            table[method] = compare(reference[0], outputs[0], labels)
            for extra, (ref, got) in enumerate(zip(reference[1:], outputs[1:], strict=True), 1):
                table[method][f"output{extra}_cosine"] = compare(ref, got)["cosine"]
        method = max(table, key=lambda m: score(table[m]))
        ctx.quant_path = ctx.candidates[method]
        ctx.validation = {
            "samples": len(ctx.val),
            "source": ctx.val.source,
            "verified": not ctx.val.synthetic,
            "method": method,
            **table[method],
            "candidates": table,
        }
        if ctx.val.synthetic:
            ctx.validation["note"] = "synthetic data: accuracy unverified"
        ctx.quantization["method"] = method
        chosen = onnx.load(str(ctx.quant_path))
        ctx.quantization["float_nodes"] = float_nodes(chosen)
        annotate_io(ctx, chosen)
        self._check_accuracy_budget(ctx, table[method])
        self._host_speed(ctx)
        for name, metrics in table.items():
            mark = "*" if name == method else " "
            acc = (f" acc {metrics['accuracy_float']:.2%} -> {metrics['accuracy_int8']:.2%}"
                   if "accuracy_int8" in metrics else "")
            ctx.report(f"  {mark} {name:<10} cosine {metrics['cosine']:.5f}  max|err| "
                       f"{metrics['max_abs_error']:.4g}{acc}")

    @staticmethod
    def _host_speed(ctx: BuildContext) -> None:
        """For a build for this machine: int8 vs float speed as the backend will run it."""
        from edgekit.cpu import exact_int8_needs_unfused

        from ..host_speed import measure
        from .quantize import runs_here

        if not runs_here(ctx):
            return
        feeds = {name: np.ascontiguousarray(a[:1]) for name, a in ctx.val.arrays.items()}
        fused = not exact_int8_needs_unfused(bool(ctx.quantization.get("reduce_range")))
        ctx.validation["host_speed"] = measure(ctx.float_path, ctx.quant_path, feeds, fused)

    @staticmethod
    def _check_accuracy_budget(ctx: BuildContext, metrics: dict[str, float]) -> None:
        """A plain build does not search, but says when int8 misses the accuracy budget."""
        if ctx.val.synthetic or ctx.config.search or ctx.config.budgets:
            return  # unverifiable, or the search and its accuracy guard handle it
        if "accuracy_int8" in metrics:
            drop, unit = (metrics["accuracy_float"] - metrics["accuracy_int8"]) * 100, "points"
        else:
            drop, unit = (1 - metrics["cosine"]) * 100, "x (1 - cosine) x 100"
        budget = ctx.profile.budgets.accuracy_drop
        if drop > budget:
            ctx.warn(f"int8 loses {drop:.2f} {unit} against float, over the {ctx.profile.name} "
                     f"accuracy budget of {budget:g}: rebuild with --max-accuracy-drop {budget:g} "
                     "to let the accuracy guard keep the most sensitive layers in float")
