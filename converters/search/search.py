"""Budget-fitting search over stage configs: pruning ratio x calibration method x float fallback.

Runs instead of the plain pipeline when budgets are given (``--max-*`` flags,
``build(budgets=...)``) or ``--search``. The source is loaded (or exported) and its data
read once; then, cheapest first:

1. for each pruning ratio (0 first, then more): prune, and *estimate* the pruned
   architecture; a ratio whose int8 estimate already misses the RAM, latency or power
   budget is recorded and skipped before anything is calibrated;
2. for each calibration method (minmax first): calibrate, quantize, validate against the
   *dense* float model on the validation data, estimate, check every budget;
3. when a ratio's best candidate fits the hardware budgets but misses the accuracy budget,
   the accuracy guard (``search/guard.py``) moves its most sensitive layers up the precision
   ladder, one more per rebuild, until the accuracy budget is met: int16 activations, fp16
   where the target's CPU has it, then float (``autoguard.ladder``, as the plain build's guard).

Each candidate is a set of stage configs (``PruneConfig``, ``CalibrateConfig``,
``QuantizeConfig``) run through the build's own plan; a ``PrefixCache`` keeps the context
after every stage, so candidates that agree on a prefix of configs share its work.

The search stops at the first candidate meeting every budget with margin; ratios beyond
the first one with a fitting candidate are not tried (more pruning only costs accuracy).
The winner is the most accurate candidate within budget (ties: faster, then smaller); it
alone is packaged, and the manifest keeps the ranked table of every candidate (as Olive's
``models_rank.json``). If none fits, ``BudgetError`` (exit 3) carries a table saying which
budget each candidate missed and by how much, and no artifact is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.metrics.task_accuracy import BuildMetric

from edgekit.errors import BudgetError, TargetError, UserError

from ..context import CALIBRATION_METHODS, BuildContext
from ..executor.shards import build_outputs
from ..pipeline import Pipeline, Plan, Rejected, StageConfig, check_order
from ..stages.calibrate import CalibrateConfig
from ..stages.prune import PruneConfig, check_ratio
from . import budgets as B
from .cache import PrefixCache
from .dispatch import candidate_builds

RATIOS = (0.0, 0.25, 0.375, 0.5, 0.625, 0.75)


@dataclass
class Candidate:
    id: str
    ratio: float
    method: str | None  # None: rejected on the estimate, never calibrated
    float_nodes: list[str]
    figures: dict[str, Any]
    verdict: B.Verdict
    seconds: float = 0.0
    ctx: BuildContext | None = field(default=None, repr=False)
    accuracy: dict[str, Any] = field(default_factory=dict)
    guard_plan: list[Any] = field(default_factory=list)  # guard.Sensitivity items kept float
    configs: dict[str, StageConfig] = field(default_factory=dict, repr=False)  # what built it
    rung: str = "float"  # the guard's precision for ``float_nodes`` (int16 / fp16 / float)

    @property
    def built(self) -> bool:
        return self.method is not None

    def rank_key(self) -> tuple[float, ...]:
        f = self.figures
        # cosine to float breaks top-1 ties (a few hundred validation samples tie often)
        return (f.get("accuracy_drop", np.inf), -f.get("cosine", -np.inf),
                f.get("latency_ms", np.inf), f.get("storage_mb", np.inf))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "prune_ratio": self.ratio, "method": self.method,
                "float_nodes": len(self.float_nodes), "stage": "built" if self.built else
                "estimated", "fits": self.verdict.fits, "figures": self.figures,
                "checks": self.verdict.to_dict(), "missed": [c.miss() for c in self.verdict.missed],
                "seconds": round(self.seconds, 2)}


class Search:
    def __init__(self, ctx: BuildContext, plan: Plan) -> None:
        config = ctx.config
        self.base = ctx
        self.plan = plan
        self.budgets = B.resolve(ctx.profile, config.budgets)
        self.margin = float(B.DEFAULT_MARGIN if config.search_margin is None
                            else config.search_margin)
        if config.prune is not None:
            self.ratios = [check_ratio(config.prune)]
        else:
            self.ratios = [check_ratio(r) for r in (config.prune_ratios or RATIOS)]
        self.methods = (list(CALIBRATION_METHODS) if config.method == "auto"
                        else [config.method])
        self.unjudged: dict[str, str] = {}  # budget -> why the estimate cannot judge it
        self.checked = self._checked_budgets()
        self.candidates: list[Candidate] = []
        self.reference: list[np.ndarray] = []
        self.task: BuildMetric | None = None
        self.stopped_early = False
        self.skipped_ratios: list[float] = []  # prune ratios that could not help (sparsity)
        self.float_missed: list[float] = []  # ratios whose pruned float model missed accuracy
        self.lever = "relax a budget (--max-*) or pick a larger target"  # said on exit 3
        self.started = time.perf_counter()
        self.cache = PrefixCache(plan, ctx)

    # ------------------------------------------------------------------ setup
    def _checked_budgets(self) -> tuple[str, ...]:
        """Every budget, minus the estimated ones when the profile has no cost model."""
        if self.base.profile.cost_model is not None:
            return tuple(B.BUDGETS)
        flagged = [k for k in B.ESTIMATED if self.budgets.sources[k] == "flag"]
        if flagged:
            raise TargetError(
                f"target {self.base.profile.name!r} has no [cost_model], so "
                f"{', '.join(B.BUDGETS[k][1] for k in flagged)} cannot be checked; expected a "
                "profile with a cost model (see `edgekit estimate`)")
        self.base.warn(f"target {self.base.profile.name!r} has no [cost_model]: only the "
                       "storage and accuracy budgets are checked")
        return ("storage_mb", "accuracy_drop")

    def estimate(self, path: Path) -> dict[str, float]:
        if not any(k in self.checked for k in B.ESTIMATED):
            return {}
        from ..estimate import estimate

        profile = self.base.profile
        # every thread count up to the profile's: the search tries threads before pruning
        try:
            est = estimate(str(path), profile, threads=list(range(1, profile.threads + 1)))
        except UserError as exc:  # a graph the estimator cannot read: said, not failed
            why = f"the estimator cannot read the model ({exc})"
            self._unjudged(B.ESTIMATED, lambda flag: f"cannot judge {flag}: {why}")
            return {}
        if not est.judges_latency:
            self._unjudged(("latency_ms", "power_w"), est.cannot_judge)
        return B.hardware_figures(est, profile, self.budgets.rate_hz, self.budgets.limits)

    def _unjudged(self, budgets: tuple[str, ...], say: Callable[[str], str]) -> None:
        """Budgets the estimate cannot judge are no longer checked; each is said once
        (``say(flag)``), not failed."""
        for budget in budgets:
            if budget in self.checked:
                self.checked = tuple(k for k in self.checked if k != budget)
                self.unjudged[budget] = say(B.BUDGETS[budget][1])
                self.base.warn(self.unjudged[budget])

    # ------------------------------------------------------------------ run
    def run(self) -> None:
        data = self.cache.run("data")  # the source read and its data split, once
        self.started = time.perf_counter()
        self.reference = build_outputs(self.base.config, data.float_path, data.val)
        self.task = BuildMetric.of(self.base.config, self.reference, data.val.labels is not None)
        self.base.report(f"  search over prune {self.ratios} x {self.methods} x float fallback; "
                         f"budgets: " + ", ".join(f"{k} {v:g}" for k, v in
                                                   self.budgets.limits.items()))
        sparsity_only = data.torch_export is None or data.torch_export.source.kind != "module"
        if sparsity_only and any(self.ratios):
            self.base.report("  pruning this source can only zero weights (sparsity): that saves "
                             "storage, not latency, RAM or power")
        if self.ratios[0] == 0 and (self._ratio(0.0) or self.stopped_early):
            self.finish()
            return
        rest = [r for r in self.ratios if r > 0]
        missed = self._missed_at(0.0) if self.ratios[0] == 0 else set()
        if rest and sparsity_only and missed and "storage_mb" not in missed:
            # magnitude sparsity zeroes weights, the dense kernels still run them all
            self.base.report(
                f"  skipping prune ratios {[float(r) for r in rest]}: pruning this source "
                f"only zeroes weights (sparsity), which saves storage, not latency, RAM "
                f"or power; the missed budget(s) {', '.join(sorted(missed))} cannot be "
                "met by pruning")
            self.skipped_ratios = rest
        elif rest:
            from .bisect import prune_by_bisection

            prune_by_bisection(self, rest)
        self.finish()

    def _missed_at(self, ratio: float) -> set[str]:
        """The budgets the best candidate at ``ratio`` misses (empty when one fits)."""
        tried = [c for c in self.candidates if c.ratio == ratio]
        if not tried or any(c.verdict.fits for c in tried):
            return set()
        return {check.budget for check in min(tried, key=Candidate.rank_key).verdict.missed}

    def _precheck(self, path: Path, ratio: float, started: float) -> bool:
        figures = self.estimate(path)
        verdict = B.check(figures, self.budgets,
                          tuple(k for k in B.ESTIMATED if k in self.checked))
        if verdict.fits:
            return True
        self.candidates.append(Candidate(f"prune{ratio:g}", ratio, None, [], figures, verdict,
                                         time.perf_counter() - started))
        self.base.report(f"  prune {ratio:g}: estimate misses "
                         + "; ".join(c.miss() for c in verdict.missed) + " -> not built")
        return False

    def _ratio(self, ratio: float) -> bool:
        """Try one pruning ratio; True when the search should not try more pruning."""
        started = time.perf_counter()
        if ratio == 0 and not self._precheck(self.cache.run("data").float_path, ratio, started):
            return False
        prune = PruneConfig(ratio, self.base.config.finetune_steps,
                            widths=self.base.config.prune_widths or "sensitivity",
                            select=self.base.config.prune_select or "reconstruction",
                            precheck=lambda p: self._precheck(p, ratio, started),
                            reference=self.reference)
        try:  # the pruned float model, prepared (and checked against torch), once per ratio
            rctx = self.cache.run(self.plan.before("calibrate"), {"prune": prune})
        except Rejected:
            return False
        built = []
        each = [({"prune": prune, "calibrate": CalibrateConfig((m,))}, m) for m in self.methods]
        began = time.perf_counter()
        # the methods of one ratio are independent: tasks on the executor (search/dispatch.py)
        with closing(candidate_builds(self.cache, "quantize", each)) as builds:
            for (configs, method), (mctx, outputs) in zip(each, builds, strict=True):
                built.append(self.evaluate(mctx, ratio, method, [], began, outputs))
                built[-1].configs = configs
                began = time.perf_counter()
                if built[-1].verdict.fits_with(self.margin):
                    self.stopped_early = True
                    return True
        best = min(built, key=Candidate.rank_key)
        if not any(c.verdict.fits for c in built) and best.verdict.hardware_fits():
            # float layers only win back what quantization lost, not what pruning removed
            float_drop = self.accuracy(build_outputs(rctx.config, rctx.float_path, rctx.val),
                                       rctx)["accuracy_drop"]
            if float_drop <= self.budgets.limits["accuracy_drop"]:
                self._guard(rctx, best)
            else:
                self.float_missed.append(ratio)
                self.base.report(f"  prune {ratio:g}: the pruned float model alone drops "
                                 f"{float_drop:.2f} pts: no float fallback can meet the budget")
        return any(c.verdict.fits for c in self.candidates if c.ratio == ratio)

    def evaluate(self, ctx: BuildContext, ratio: float, method: str, nodes: list[str],
                 began: float, outputs: list[np.ndarray] | None = None, rung: str = "float") -> Candidate:
        """``outputs``: the validation run when a candidate task made it (dispatch.py)."""
        path = ctx.candidates[method]
        ctx.quant_path = path
        ctx.mark("search", "quant_path")  # the search validates; the validate stage does not run
        if outputs is None:
            outputs = build_outputs(ctx.config, path, ctx.val, exact_int8=True)
        acc = self.accuracy(outputs, ctx)
        data = path.read_bytes()
        vectors = B.vector_bytes(ctx.inputs, ctx.outputs, _quantized_inputs(data), len(data),
                                 len(ctx.val), ctx.config.test_vectors, len(ctx.formats))
        figures: dict[str, Any] = {"storage_mb": B.storage_estimate(data, len(ctx.formats),
                                                                     vectors)}
        figures.update(self.estimate(path))
        figures.update(accuracy_drop=acc["accuracy_drop"], accuracy=acc["accuracy"],
                       cosine=acc["cosine"])
        verdict = B.check(figures, self.budgets, self.checked)
        name = f"prune{ratio:g}-{method}" + (f"-{rung}{len(nodes)}" if nodes else "")
        cand = Candidate(name, ratio, method, nodes, {k: _round(v) for k, v in figures.items()},
                         verdict, time.perf_counter() - began, ctx, acc, rung=rung)
        self.candidates.append(cand)
        status = ("fits" + (" with margin" if verdict.fits_with(self.margin) else "")
                  if verdict.fits else "misses " + "; ".join(c.miss() for c in verdict.missed))
        self.base.report(f"  {name}: drop {acc['accuracy_drop']:.2f} pts, "
                         + ", ".join(f"{k} {figures[k]:.4g}" for k in
                                     ("storage_mb", "ram_mb", "latency_ms", "power_w")
                                     if k in figures) + f" -> {status}")
        return cand

    def accuracy(self, outputs: list[np.ndarray], ctx: BuildContext) -> dict[str, Any]:
        """Figures against the dense float reference, the drop in the task metric's points
        (the one an exit 3 names); unlabelled top-1 too: its cosine said 12 points where 31.5%
        of EfficientNet-Lite0's decisions changed (pruned 5%). sqnr keeps the cosine."""
        acc = B.accuracy_figures(self.reference[0], outputs[0], ctx.val.labels)
        if self.task is not None and self.task.name != "sqnr" and not (
                self.task.name == "top1" and self.task.use_labels):
            score = self.task.score(self.reference, outputs, ctx.val.labels,
                                    [o["name"] for o in ctx.outputs], acc["cosine"])
            acc.update(accuracy_drop=score.drop, metric=f"{self.task.name}: {score.basis}")
        return acc

    def _guard(self, rctx: BuildContext, best: Candidate) -> None:
        from .autoguard import label_ops, ladder, rung_config
        from .guard import guard, nodes_of, sensitivity

        config = rctx.config
        ranking = sensitivity(rctx.float_path, best.ctx.quant_path, rctx.calib,
                              config.sensitivity_samples)
        label_ops(ranking, rctx.float_path)
        method = best.method

        def attempt(plan: list[Any], rung: str) -> Candidate:
            began = time.perf_counter()
            # the same prune and calibrate configs: the cache re-runs quantization only
            configs = {**best.configs, "quantize": rung_config(config, nodes_of(plan), rung)}
            gctx = self.cache.run("quantize", configs)
            cand = self.evaluate(gctx, best.ratio, method, nodes_of(plan), began, rung=rung)
            cand.guard_plan = list(plan)
            cand.configs = configs
            return cand

        self.base.report(f"  accuracy guard on {best.id}: most sensitive "
                         + ", ".join(f"{s.tensor} ({s.sqnr_db:.1f} dB)" for s in ranking[:3]))
        guard(ranking, attempt, met=lambda c: c.verdict.fits,
              give_up=lambda c: not c.verdict.hardware_fits(),
              max_steps=config.guard_steps, rungs=ladder(self.base.profile))

    # ------------------------------------------------------------------ result
    def ranked(self) -> list[Candidate]:
        fits = sorted((c for c in self.candidates if c.verdict.fits), key=Candidate.rank_key)
        rest = sorted((c for c in self.candidates if not c.verdict.fits),
                      key=lambda c: sum(min(x.over_pct, 1e6) for x in c.verdict.missed))
        return fits + rest

    def finish(self) -> None:
        from .table import table

        ranked = self.ranked()
        for cand in [c for c in ranked if c.verdict.fits]:
            if self._package(cand, ranked):
                self.base.report(table(ranked, self.budgets, self.checked, cand, self.unjudged))
                return
        raise BudgetError(
            f"no build of {self.cache.run('data').source_info.get('name', 'the model')} fits the "
            f"{self.base.profile.name} budgets: {len(self.candidates)} candidate(s) tried "
            "(table below)"
            + (f"; prune ratios {[float(r) for r in self.skipped_ratios]} were skipped: "
               "sparsity saves storage only" if self.skipped_ratios else "")
            + f"; {self.lever}"
            # an accuracy miss among them: which metric judged it, and how to pick another
            + (f"; accuracy {self.task.how_to_choose()}" if self.task is not None else ""),
            table(ranked, self.budgets, self.checked, None, self.unjudged))

    def _package(self, cand: Candidate, ranked: list[Candidate]) -> bool:
        """Package ``cand``; False (and no file left) when the written artifact is too big."""
        from edgekit.converters.graph.qdq import float_nodes

        from .guard import Sensitivity
        from .table import manifest_section

        win = cand.ctx
        win.quant_path = win.candidates[cand.method]
        metrics = dict(cand.accuracy["metrics"])
        win.validation = {"samples": len(win.val), "source": win.val.source,
                          "verified": not win.val.synthetic, "method": cand.method,
                          "reference": "dense float model (before pruning and quantization)",
                          "accuracy_drop": cand.figures["accuracy_drop"],
                          "accuracy_metric": cand.accuracy["metric"], **metrics}
        if win.val.synthetic:
            win.validation["note"] = "synthetic data: accuracy unverified"
        import onnx

        win.quantization["method"] = cand.method
        win.quantization["float_nodes"] = float_nodes(onnx.load(str(win.quant_path)))
        if cand.guard_plan:
            win.extra_manifest["accuracy_guard"] = {
                "keep_float": cand.float_nodes if cand.rung in ("fp16", "float") else [],
                "rung": cand.rung, "nodes": cand.float_nodes,
                "layers": [s.to_dict() for s in cand.guard_plan if isinstance(s, Sensitivity)],
                "why": "the int8 build missed the accuracy budget; these tensors cost the most "
                       f"output SQNR when quantized alone, so the nodes quantizing them run at {cand.rung}"}
        win.extra_manifest["budgets"] = {**self.budgets.to_dict(), "checked": list(self.checked),
                                         "figures": cand.figures, "checks": cand.verdict.to_dict(),
                                         "storage_note": "estimated before writing; the artifact "
                                                         "size is sizes/the file itself"}
        win.extra_manifest["search"] = manifest_section(self, ranked, cand)
        win.stages.append({"name": "search", "params": {"candidates": len(self.candidates),
                                                        "winner": cand.id},
                           "seconds": round(time.perf_counter() - self.started, 3)})
        win.mark("search", "validation", "quantization")
        Pipeline(self.plan.after("validate")).run(win)
        written = win.output_path.stat().st_size / B.MB
        limit = self.budgets.limits["storage_mb"]
        if written > limit * (1 + 1e-9):
            win.output_path.unlink(missing_ok=True)
            cand.verdict = B.Verdict([c if c.budget != "storage_mb" else
                                      B.Check("storage_mb", limit, written)
                                      for c in cand.verdict.checks])
            cand.figures["storage_mb"] = round(written, 6)
            self.base.report(f"  {cand.id}: written artifact {written:.4g} MB > {limit:g} MB")
            return False
        cand.figures["storage_mb"] = round(written, 6)
        self.base.artifact_bytes = win.artifact_bytes
        # the winner's warnings, and what the search could not judge (said before it forked)
        self.base.warnings[:] = win.warnings + [w for w in self.unjudged.values()
                                                if w not in win.warnings]
        return True


def _quantized_inputs(model: bytes) -> set[str]:
    import onnx
    from edgekit.converters.graph.qdq import input_quantization

    return set(input_quantization(onnx.load_model_from_string(model)))


def _round(value: Any) -> Any:
    return round(float(value), 6) if isinstance(value, (float, np.floating)) else value


def run_search(ctx: BuildContext, plan: Plan) -> None:
    """Entry point from ``edgekit.converters.build``."""
    if not all(n in plan for n in ("data", "prune", "calibrate", "quantize", "validate")):
        raise UserError(f"the budget search needs the data, prune, calibrate, quantize and "
                        f"validate stages; got {list(plan.names)}")
    check_order(plan.names, ctx.available())  # the whole plan, once
    Search(ctx, plan).run()
