"""Validate: score each int8 candidate against the float model with the task metric; keep the
best; say whether it meets the accuracy budget.

The metric is ``--metric`` or a default chosen from the float outputs (``task_accuracy.py``);
best = lowest drop in points, where drops within one validation sample's decision of the lowest
count as a tie (``choose``), broken by the continuous figures: highest cosine, then lowest max
abs error. On a small validation set (16 samples without ``--val`` from 32 calibration ones)
one near-tie flip is 6 points: ranking by the drop first picked among equals on noise. Every output
is also checked per slice of channels (``metrics.slices``): the manifest and summary name the
worst slice, which one cosine over a packed output hides.

The budget is in the units measured (``BuildMetric.budget``: accuracy with labels, agreement
with float without); the figure comes with its N and 95% interval (``metrics.evidence``) and
``validation.accuracy_budget`` records the verdict: met, missed (the whole interval past the
budget: the only case acted on) or cannot tell (with about how many samples would). The
reference, plain per-channel min-max PTQ (``reference_ptq``), is scored on the same samples and
the artifact compared with it, paired by sample. Acting on a miss (the accuracy guard, exit 3, or an accepted drop) is
``search/autoguard.py``'s job, run by the build right after this stage. Synthetic data
cannot verify anything, and a budget search has its own guard: neither is checked here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.graph.qdq import float_nodes, input_quantization, output_quantization
from edgekit.converters.metrics.task_accuracy import BuildMetric, Scorer, TaskScore
from edgekit.converters.tflite.shipped import FORMAT_NAMES

from ..context import BuildContext
from ..pipeline import Stage

REFERENCE_NAME = "onnxruntime quantize_static, QDQ per-channel min-max U8S8"


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


def budget_check(ctx: BuildContext, score: TaskScore, task: BuildMetric, checked: bool) -> dict[str, Any]:
    """The manifest's ``accuracy_budget``: limit, what it bounds, the evidence and its verdict."""
    budget, judged = task.budget(ctx.profile)
    verdict = score.evidence.verdict(budget)
    check = {"limit": budget, "judged": judged, "metric": task.name, "checked": checked,
             "met": verdict != "missed", "verdict": verdict, "evidence": score.evidence.to_dict(budget),
             "format": score.format,
             "line": f"{judged} ({task.name}, {FORMAT_NAMES[score.format]}): {score.evidence.judged(budget)}"}
    reference = reference_in(ctx, score.format)
    if reference is not None and score.result.per_sample is not None:
        from ..metrics.evidence import compare

        versus = compare(score.result.per_sample, reference)
        check["versus_reference"] = {**versus.to_dict(0.0), "worse": versus.low > 0, "format": score.format}
    return check


def reference_in(ctx: BuildContext, judged: str) -> Any:
    """The reference PTQ's per-sample parts in the format ``judged``: as scored, or, when the
    artifact fell back to ONNX (its .tflite could not be written) while the reference's .tflite
    was judged, its ONNX graph scored once more, so the comparison pairs like with like."""
    reference = ctx.evidence.get("reference")
    if reference is None or ctx.evidence.get("reference_format", judged) == judged or judged != "onnx":
        return reference
    if "reference_onnx" not in ctx.evidence:
        path = ctx.workdir / "reference-ptq.onnx"
        scorer = Scorer(ctx.config, ctx.float_path, ctx.val, [o["name"] for o in ctx.outputs])
        ctx.evidence["reference_onnx"] = scorer.score(path)[1].result.per_sample if path.exists() else None
    return ctx.evidence["reference_onnx"]


def record_choice(ctx: BuildContext, path: Path, method: str, metrics: dict[str, float],
                  score: TaskScore, task: BuildMetric, table: dict[str, dict[str, float]]) -> None:
    """Make ``path`` the build's int8 model and write the manifest's validation section."""
    import onnx

    checked = not (ctx.val.synthetic or ctx.config.search or ctx.config.budgets)
    reference = (ctx.validation or {}).get("reference_ptq")
    ctx.quant_path = path
    ctx.validation = {
        "samples": len(ctx.val),
        "calibration_samples": len(ctx.calib) if ctx.calib is not None else 0,
        # without --val the validation half may share samples with calibration (stages/data.py)
        "in_calibration_set": (ctx.extra_manifest.get("calibration") or {}).get("validation_also_calibrated", 0),
        "source": ctx.val.source,
        "verified": not ctx.val.synthetic,
        "method": method,
        **metrics,
        "metric": {**task.to_dict(), **score.to_dict()},
        "accuracy_drop": round(score.drop, 4),
        "accuracy_budget": {},
        "worst_slice": score.worst(),
        "outputs": [{"name": r.name, "sqnr_db": round(r.sqnr_db, 2), "slices": len(r.slices),
                     "worst_sqnr_db": round(r.worst.sqnr_db, 2),
                     "worst_decisions_changed": round(r.worst.decisions_changed, 6)} for r in score.outputs],
        "candidates": table,
    }
    if reference:
        ctx.validation["reference_ptq"] = reference
    ctx.validation["accuracy_budget"] = budget_check(ctx, score, task, checked)
    if ctx.val.synthetic:
        ctx.validation["note"] = "synthetic data: accuracy unverified"
    ctx.quantization["method"] = method
    model = onnx.load(str(path))
    ctx.quantization["float_nodes"] = float_nodes(model)
    annotate_io(ctx, model)


def choose(table: dict[str, dict[str, float]], scores: dict[str, TaskScore], samples: int) -> str:
    """The candidate to keep: among those whose drop is within one sample's decision
    (``100 / samples`` points) of the lowest, the highest cosine, then the lowest max abs error.
    An exact cosine and error tie keeps the lower drop, then the order listed."""
    noise = 100.0 / max(1, samples)
    lowest = min(s.drop for s in scores.values())
    tied = [m for m in table if scores[m].drop <= lowest + noise + 1e-9]
    return min(tied, key=lambda m: (-table[m]["cosine"], table[m]["max_abs_error"], scores[m].drop))


class Validate(Stage):
    name = "validate"
    requires = frozenset({"candidates", "float_path", "inputs", "outputs", "val"})
    provides = frozenset({"evidence", "inputs", "outputs", "quant_path", "quantization", "validation"})

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return {"samples": ctx.validation.get("samples"), "chosen": ctx.validation.get("method"),
                "metric": (ctx.validation.get("metric") or {}).get("name")}

    def run(self, ctx: BuildContext) -> None:
        ctx.evidence = {}
        scorer = Scorer.for_build(ctx)
        task = scorer.task
        ctx.report(f"  metric: {task.name} ({task.reason})")
        table: dict[str, dict[str, float]] = {}
        scores: dict[str, TaskScore] = {}
        keep_float = ctx.quantization.get("keep_float") or []
        for method, path in ctx.candidates.items():
            table[method], scores[method] = scorer.score(path, keep_float, ctx.ranges.get(method))
            table[method]["task_drop"] = scores[method].drop
        method = choose(table, scores, len(ctx.val))
        # a plain build's decision has its reference; a budget search's candidates are not judged so
        plain = not (ctx.val.synthetic or ctx.config.search or ctx.config.budgets)
        ctx.validation = {"reference_ptq": self._reference(ctx, scorer)} if plain else {}
        for name, metrics in table.items():
            mark = "*" if name == method else " "
            acc = (f" acc {metrics['accuracy_float']:.2%} -> {metrics['accuracy_int8']:.2%}"
                   if "accuracy_int8" in metrics else "")
            ctx.report(f"  {mark} {name:<10} {task.name} drop {scores[name].drop:.2f} pts  cosine "
                       f"{metrics['cosine']:.5f}  max|err| {metrics['max_abs_error']:.4g}{acc}")
        record_choice(ctx, ctx.candidates[method], method, table[method], scores[method], task, table)
        ctx.report(f"  {ctx.validation['accuracy_budget']['line']}")
        reference = ctx.validation.get("reference_ptq")
        if reference:
            ctx.report(f"  reference PTQ ({REFERENCE_NAME}): {reference['line']}")
        worst = ctx.validation["worst_slice"]
        ctx.report(f"  worst slice: {worst['output']} channels {worst['channels'][0]}..{worst['channels'][1]} "
                   f"SQNR {worst['sqnr_db']:.1f} dB, {worst['decisions_changed']:.1%} decisions changed")
        self._host_speed(ctx)

    @staticmethod
    def _reference(ctx: BuildContext, scorer: Scorer) -> dict[str, Any]:
        """Plain per-channel min-max PTQ of the prepared model, scored on the same samples."""
        import time

        from .quantize import PLAIN_MINMAX
        from .reference_ptq import reference_ptq

        began = time.monotonic()
        prepared = ctx.workdir / "prepared.onnx"
        batched = not all(isinstance(i["shape"][i.get("batch_axis", 0)], int) for i in ctx.inputs)
        # equalization left the prepared model as it was: the build's min-max ranges are its ranges
        same = ctx.float_path == prepared and ctx.activation_type == "uint8"
        out = ctx.workdir / "reference-ptq.onnx"
        ranges = ctx.ranges.get("minmax") if same else None
        try:
            plain = ctx.workdir / PLAIN_MINMAX if same else None  # the quantize stage's own call
            path = reference_ptq(prepared if prepared.exists() else ctx.float_path, ctx.calib, out, batched,
                                 ranges, plain)
            # judged as the artifact is: its .tflite (the same writer, nothing kept float) when that ships
            _metrics, score = scorer.score(path, (), ranges or out.with_suffix(".ranges.json"))
        except Exception as exc:  # noqa: BLE001 - the reference is a yardstick, never a reason to fail
            return {"error": f"{type(exc).__name__}: {str(exc)[:200]}", "line": f"not scored ({exc})"[:200]}
        budget, _judged = scorer.task.budget(ctx.profile)
        ctx.evidence["reference"] = score.result.per_sample
        ctx.evidence["reference_format"] = score.format
        ctx.timings.seconds["reference_ptq"] = time.monotonic() - began  # not in the manifest: bytes stay the same
        return {"tool": REFERENCE_NAME, "figure": round(score.drop, 4), "evidence": score.evidence.to_dict(budget),
                "format": score.format, "line": f"{score.evidence.judged(budget)} ({FORMAT_NAMES[score.format]})"}

    @staticmethod
    def _host_speed(ctx: BuildContext) -> None:
        """For a build for this machine: int8 vs float speed as the backend will run it."""
        from edgekit.converters.estimate.host_speed import measure

        from edgekit.device.cpu import exact_int8_needs_unfused

        from .quantize import runs_here

        if not runs_here(ctx):
            return
        feeds = {name: np.ascontiguousarray(a[:1]) for name, a in ctx.val.arrays.items()}
        fused = not exact_int8_needs_unfused(bool(ctx.quantization.get("reduce_range")))
        ctx.validation["host_speed"] = measure(ctx.float_path, ctx.quant_path, feeds, fused)
