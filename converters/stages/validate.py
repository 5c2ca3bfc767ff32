"""Validate: score each int8 candidate against the float model with the task metric; keep the
best; enforce the accuracy budget.

The metric is ``--metric`` or a default chosen from the float outputs (``task_accuracy.py``);
best = lowest drop in points (ties: highest cosine, then lowest max abs error). Every output
is also checked per slice of channels (``metrics.slices``): the manifest and summary name the
worst slice, which one cosine over a packed output hides.

The budget is the profile's ``accuracy_drop``. When int8 misses it on real data, the accuracy
guard (``accuracy_guard.py``) runs: the most sensitive layers go to float until the budget is
met within ``--guard-time``. Still missed: ``BudgetError`` (exit 3, no artifact) unless
``--accept-accuracy-drop``, which ships the best attempt and records that it misses.
Synthetic data cannot verify anything: then the figures are reported, never enforced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgekit.errors import BudgetError

from ..context import BuildContext
from ..pipeline import Stage
from ..qdq import float_nodes, input_quantization, output_quantization
from ..runner import compare, run_dataset
from ..task_accuracy import BuildMetric, TaskScore


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
    requires = frozenset({"calib", "candidates", "float_path", "inputs", "outputs", "ranges", "val"})
    provides = frozenset({"extra_manifest", "inputs", "outputs", "quant_path", "quantization", "validation"})

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return {"samples": ctx.validation.get("samples"), "chosen": ctx.validation.get("method"),
                "metric": (ctx.validation.get("metric") or {}).get("name")}

    def run(self, ctx: BuildContext) -> None:
        reference = run_dataset(ctx.float_path, ctx.val)
        labels = ctx.val.labels
        names = [o["name"] for o in ctx.outputs] if len(ctx.outputs) == len(reference) else None
        names = names or [f"output{i}" for i in range(len(reference))]
        task = BuildMetric.of(ctx.config, reference, labels is not None)
        ctx.report(f"  metric: {task.name} ({task.reason})")

        def evaluate(path: Path) -> tuple[dict[str, float], TaskScore]:
            outputs = run_dataset(path, ctx.val, exact_int8=True)
            # the first output decides; the others are reported too
            metrics = compare(reference[0], outputs[0], labels)
            for extra, (ref, got) in enumerate(zip(reference[1:], outputs[1:], strict=True), 1):
                metrics[f"output{extra}_cosine"] = compare(ref, got)["cosine"]
            return metrics, task.score(reference, outputs, labels, names, metrics["cosine"])

        table: dict[str, dict[str, float]] = {}
        scores: dict[str, TaskScore] = {}
        for method, path in ctx.candidates.items():
            table[method], scores[method] = evaluate(path)
            table[method]["task_drop"] = scores[method].drop
        method = min(table, key=lambda m: (scores[m].drop, -table[m]["cosine"], table[m]["max_abs_error"]))
        for name, metrics in table.items():
            mark = "*" if name == method else " "
            acc = (f" acc {metrics['accuracy_float']:.2%} -> {metrics['accuracy_int8']:.2%}"
                   if "accuracy_int8" in metrics else "")
            ctx.report(f"  {mark} {name:<10} {task.name} drop {scores[name].drop:.2f} pts  cosine "
                       f"{metrics['cosine']:.5f}  max|err| {metrics['max_abs_error']:.4g}{acc}")
        ctx.quant_path = ctx.candidates[method]
        chosen, chosen_metrics = scores[method], table[method]
        guard = self._enforce_budget(ctx, method, chosen, lambda p: evaluate(p)[1])
        if guard is not None:
            ctx.quant_path, chosen = guard
            chosen_metrics = evaluate(ctx.quant_path)[0]
        ctx.validation = {
            "samples": len(ctx.val),
            "source": ctx.val.source,
            "verified": not ctx.val.synthetic,
            "method": method,
            **chosen_metrics,
            "metric": {**task.to_dict(), **chosen.to_dict()},
            "accuracy_drop": round(chosen.drop, 4),
            "worst_slice": chosen.worst(),
            "outputs": [{"name": r.name, "sqnr_db": round(r.sqnr_db, 2), "slices": len(r.slices),
                         "worst_sqnr_db": round(r.worst.sqnr_db, 2),
                         "worst_decisions_changed": round(r.worst.decisions_changed, 6)} for r in chosen.outputs],
            "candidates": table,
        }
        if ctx.val.synthetic:
            ctx.validation["note"] = "synthetic data: accuracy unverified"
        worst = ctx.validation["worst_slice"]
        ctx.report(f"  worst slice: {worst['output']} channels {worst['channels'][0]}..{worst['channels'][1]} "
                   f"SQNR {worst['sqnr_db']:.1f} dB, {worst['decisions_changed']:.1%} decisions changed")
        import onnx

        ctx.quantization["method"] = method
        model = onnx.load(str(ctx.quant_path))
        ctx.quantization["float_nodes"] = float_nodes(model)
        annotate_io(ctx, model)

    @staticmethod
    def _enforce_budget(ctx: BuildContext, method: str, score: TaskScore,
                        evaluate: Any) -> tuple[Path, TaskScore] | None:
        """None when the budget is met (or cannot be checked); else the guard's (path, score),
        or ``BudgetError`` when it still misses and the user did not accept the drop."""
        from ..accuracy_guard import run_guard, table

        config = ctx.config
        budget = ctx.profile.budgets.accuracy_drop
        if ctx.val.synthetic or config.search or config.budgets or score.drop <= budget:
            return None  # met, unverifiable, or the budget search and its own guard handle it
        ctx.report(f"  int8 misses the {ctx.profile.name} accuracy budget: {score.drop:.2f} > {budget:g} "
                   f"points ({score.basis}); accuracy guard for up to {config.guard_time:g} s")
        outcome = run_guard(ctx, method, ctx.candidates[method], budget, evaluate)
        section = outcome.to_dict(budget, config.guard_time)
        ctx.extra_manifest["accuracy_guard"] = section
        met = outcome.met
        if met is not None:
            ctx.quantization["keep_float"] = sorted(set(config.keep_float) | set(met.nodes))
            return met.path, met.score
        rows = table(score, outcome, budget)
        if not config.accept_accuracy_drop:
            raise BudgetError(
                f"int8 misses the {ctx.profile.name} accuracy budget of {budget:g} points "
                f"({score.basis}) and the accuracy guard could not meet it; no artifact written. "
                "Pass --accept-accuracy-drop to ship it anyway, raise --guard-time, or use a larger "
                "budget (--max-accuracy-drop)", rows)
        best = outcome.best
        path, final = (best.path, best.score) if best and best.score.drop < score.drop else (ctx.candidates[method], score)
        if best is not None and path == best.path:
            ctx.quantization["keep_float"] = sorted(set(config.keep_float) | set(best.nodes))
        section["accepted_drop"] = round(final.drop, 4)
        ctx.warn(f"accuracy drop ACCEPTED (--accept-accuracy-drop): {final.drop:.2f} points lost, over the "
                 f"{ctx.profile.name} budget of {budget:g}")
        ctx.report(rows)
        return path, final
