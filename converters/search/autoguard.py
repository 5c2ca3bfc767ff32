"""The accuracy guard of a plain build: on by default, bounded in time, with a progress bar.

When the chosen int8 candidate misses the profile's accuracy budget (measured with the
build's task metric, ``task_accuracy.py``), the guard ranks the quantized tensors by how
much output SQNR each costs alone (``search/guard.sensitivity``) and moves the most
sensitive ones up the precision ladder, more at each rebuild (1, 2, 4, 8 ... of them), until
the budget is met or ``--guard-time`` runs out. At each size the layers climb the ladder
``ladder(profile)``, cheapest rung first: int16 activations with int8 weights (a16w8, for
activation-sensitive layers of ops with 16x8 kernels), fp16 weights (only where the target's
CPU has fp16 arithmetic: ``profile.cpu.fp16``), then float; the first rung that meets the
budget wins (``stages/precision.py`` rewrites the graph; both formats run it).

Within the bound: the ranking takes at most ``RANK_SHARE`` of it, and a rebuild starts only
when it should end inside it (its time estimated from the build's own quantize and validate
stages, then from the last rebuild).

``enforce_accuracy(ctx)`` runs right after the validate stage of a plain build: a met (or
unchecked) budget passes; a miss runs the guard, and if it still misses, ``BudgetError``
(exit 3, the table, no artifact) unless ``--accept-accuracy-drop``, which ships the best
attempt and says so in the manifest and summary.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgekit.errors import BudgetError

from ..context import BuildContext
from ..stages.quantize import QuantizeConfig
from ..task_accuracy import Scorer, TaskScore

LADDER: tuple[str, ...] = ("int8", "int16", "fp16", "float")  # every rung, cheapest first
# share of --guard-time the ranking may take; the rest is for rebuilds (on a MobileNetV2 the
# output-level measurement of every tensor alone takes longer than the whole bound)
RANK_SHARE = 0.4


def ladder(profile: Any) -> tuple[str, ...]:
    """The rungs this target has: fp16 only where its CPU has fp16 arithmetic."""
    return tuple(r for r in LADDER if r != "fp16" or profile.cpu.fp16)


@dataclass
class Attempt:
    float_tensors: list[str]  # the tensors moved up the ladder (named so since the float-only guard)
    nodes: list[str]
    path: Path
    score: TaskScore
    met: bool
    seconds: float
    rung: str = "float"

    def to_dict(self) -> dict[str, Any]:
        return {"float_tensors": self.float_tensors, "nodes": self.nodes, "rung": self.rung,
                "drop": round(self.score.drop, 4), "met": self.met, "seconds": round(self.seconds, 2)}


@dataclass
class GuardOutcome:
    attempts: list[Attempt] = field(default_factory=list)
    ranked: int = 0            # tensors whose sensitivity was measured
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def met(self) -> Attempt | None:
        return next((a for a in self.attempts if a.met), None)

    @property
    def best(self) -> Attempt | None:
        return min(self.attempts, key=lambda a: a.score.drop, default=None)

    rungs: tuple[str, ...] = ("int8", "float")

    def to_dict(self, budget: float, time_bound: float) -> dict[str, Any]:
        return {"ladder": list(self.rungs), "budget_points": budget, "time_bound_s": time_bound,
                "seconds": round(self.seconds, 2), "timed_out": self.timed_out,
                "tensors_ranked": self.ranked, "met": self.met is not None,
                "attempts": [a.to_dict() for a in self.attempts]}


def prefix_sizes(count: int) -> list[int]:
    """1, 2, 4, 8 ... and ``count``: few rebuilds, and the last one tries every ranked step."""
    sizes, k = [], 1
    while k < count:
        sizes.append(k)
        k *= 2
    return sizes + [count] if count else []


class Progress:
    """A tqdm bar on a TTY unless quiet; nothing otherwise (logs stay clean)."""

    def __init__(self, quiet: bool) -> None:
        self.bar: Any = None
        self.enabled = not quiet and sys.stderr.isatty()

    def __call__(self, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="accuracy guard", unit="step", leave=False, file=sys.stderr)
        elif total:
            self.bar.total += total
            self.bar.refresh()
        else:
            self.bar.update(1)

    def remaining(self, steps: int) -> None:
        """The ranking stopped early: the bar's total becomes what is done plus ``steps``."""
        if self.bar is not None:
            self.bar.total = self.bar.n + steps
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_guard(ctx: BuildContext, method: str, qdq_path: Path, budget: float,
              evaluate: Callable[[Path], TaskScore]) -> GuardOutcome:
    """Keep the most sensitive tensors float until ``evaluate(path).drop <= budget``."""
    from .guard import nodes_of, rungs_for, sensitivity, steps

    config = ctx.config
    started = time.monotonic()
    deadline = started + config.guard_time
    outcome = GuardOutcome(rungs=ladder(ctx.profile))
    progress = Progress(config.quiet)
    rebuild_s = rebuild_estimate(ctx)  # then: the last rebuild's time
    if config.guard_time <= 0:  # no rebuild can happen: ranking would only cost time
        outcome.timed_out = True  # (4.7 of 28 s of an EfficientNet-Lite0 build, bench_build)
        ctx.report("  accuracy guard: off (--guard-time 0)")
        return outcome
    try:
        rank_until = min(started + RANK_SHARE * config.guard_time, deadline - rebuild_s)
        ranking = sensitivity(ctx.float_path, qdq_path, ctx.calib, config.sensitivity_samples,
                              deadline=rank_until, progress=progress)
        outcome.ranked = sum(1 for s in ranking if s.measured == "output")
        plans = steps(ranking, max_steps=len(ranking))
        sizes = prefix_sizes(len(plans))
        progress.remaining(len(sizes))  # rebuild sizes; unmeasured tensors are no longer ahead
        if ranking:
            ctx.report("  accuracy guard: most sensitive " + ", ".join(
                f"{s.tensor} ({s.sqnr_db:.1f} dB)" for s in ranking[:3]))
        label_ops(ranking, ctx.float_path)
        for k, size in enumerate(sizes):
            plan = plans[size - 1]
            nodes = nodes_of(plan)
            for rung in rungs_for(plan, outcome.rungs):
                if time.monotonic() + rebuild_s > deadline:  # it would end past the bound
                    outcome.timed_out = True
                    break
                began = time.monotonic()
                path = rebuild(ctx, method, nodes, k, rung)
                score = evaluate(path)
                attempt = Attempt([p.tensor for p in plan], nodes, path, score, score.drop <= budget,
                                  time.monotonic() - began, rung)
                outcome.attempts.append(attempt)
                rebuild_s = attempt.seconds
                ctx.report(f"  accuracy guard: {len(plan)} tensor(s) {rung} ({len(nodes)} nodes): "
                           f"drop {score.drop:.2f} points -> {'meets' if attempt.met else 'misses'} {budget:g}")
                if attempt.met:
                    break
            progress(0)
            if outcome.met is not None or outcome.timed_out:
                break
        else:
            outcome.timed_out = time.monotonic() > deadline and outcome.met is None
    finally:
        progress.close()
    outcome.seconds = time.monotonic() - started
    return outcome


def rebuild_estimate(ctx: BuildContext) -> float:
    """Seconds one guard rebuild should take before any ran: the build's own quantize stage
    and its validation of one candidate (a rebuild is one of each)."""
    seconds = {s["name"]: float(s.get("seconds", 0.0)) for s in ctx.stages}
    return seconds.get("quantize", 0.0) + seconds.get("validate", 0.0) / max(1, len(ctx.candidates))


def onnx_nodes(path: Path) -> dict[str, str]:
    """Node name -> op type of the float model (which rungs a plan's nodes can take)."""
    import onnx

    return {n.name: n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node}


def label_ops(ranking: list[Any], float_path: Path) -> None:
    """Give each ranked tensor the op types of its fix set (``rungs_for`` reads them)."""
    model = onnx_nodes(float_path)
    for item in ranking:
        item.ops = {model.get(n, "") for n in item.nodes}


def rung_config(config: Any, nodes: list[str], rung: str) -> QuantizeConfig:
    """The quantize stage's config with ``nodes`` at ``rung`` (int16 / fp16 / float) and the
    user's ``--keep-float`` nodes float: the plain guard's rebuilds and the search's alike."""
    user = set(config.keep_float)
    float_nodes = user | set(nodes) if rung == "float" else user
    return QuantizeConfig(tuple(sorted(float_nodes)), config.per_channel,
                          int16=tuple(sorted(nodes)) if rung == "int16" else (),
                          fp16=tuple(sorted(set(nodes) - user)) if rung == "fp16" else (),
                          bias_correct=config.bias_correct, adaround=config.adaround)


def rebuild(ctx: BuildContext, method: str, nodes: list[str], k: int | str, rung: str = "float",
            folder: str = "guard") -> Path:
    """Quantize once more with ``nodes`` at ``rung`` (int16 / fp16 / float; the user's
    ``--keep-float`` nodes float), in its own folder."""
    from ..stages.quantize import Quantize

    sub = ctx.fork(f"{folder}{k}-{rung}")
    sub.ranges = {method: ctx.ranges[method]}
    sub.candidates = {}
    step = Quantize()
    step.config = rung_config(ctx.config, nodes, rung)
    step.run(sub)
    return sub.candidates[method]


def table(first: TaskScore, outcome: GuardOutcome, budget: float) -> str:
    """Rows: the plain int8 build and every guard attempt, with the drop against the budget."""
    rows = [("int8 (no float layers)", first.drop)]
    rows += [(f"{len(a.float_tensors)} tensor(s) {a.rung}, {len(a.nodes)} node(s)", a.score.drop)
             for a in outcome.attempts]
    width = max(len(r[0]) for r in rows)
    lines = [f"  {'build':<{width}}  drop (points)  budget {budget:g}"]
    lines += [f"  {name:<{width}}  {drop:13.2f}  {'met' if drop <= budget else 'MISSED'}" for name, drop in rows]
    if outcome.timed_out:
        lines.append(f"  (guard stopped at its time bound after {outcome.seconds:.0f} s; raise --guard-time)")
    else:
        lines.append(f"  (guard: {outcome.ranked} tensor(s) ranked, {len(outcome.attempts)} rebuild(s), "
                     f"{outcome.seconds:.0f} s)")
    return "\n".join(lines)


def enforce_accuracy(ctx: BuildContext) -> None:
    """After validate: met or unchecked passes; a miss runs the guard, then ships, or raises."""
    from ..stages.validate import record_choice

    check = ctx.validation.get("accuracy_budget") or {}
    if not check.get("checked") or check.get("met"):
        return
    config = ctx.config
    budget = float(check["limit"])
    method = ctx.validation["method"]
    scorer = Scorer(config, ctx.float_path, ctx.val, [o["name"] for o in ctx.outputs])
    first_metrics, first = scorer.score(ctx.quant_path)
    ctx.report(f"  int8 misses the {ctx.profile.name} accuracy budget: {first.drop:.2f} > {budget:g} "
               f"points ({first.basis}); accuracy guard for up to {config.guard_time:g} s")
    outcome = run_guard(ctx, method, ctx.quant_path, budget, lambda path: scorer.score(path)[1])
    section = outcome.to_dict(budget, config.guard_time)
    section["int8_drop"] = round(first.drop, 4)  # the miss that started the guard
    section["basis"] = first.basis
    rows = table(first, outcome, budget)
    chosen = outcome.met
    if chosen is None and not config.accept_accuracy_drop:
        raise BudgetError(
            f"int8 misses the {ctx.profile.name} accuracy budget of {budget:g} points ({first.basis}) "
            "and the accuracy guard could not meet it; no artifact written. Pass --accept-accuracy-drop "
            "to ship it anyway, raise --guard-time, or set another budget (--max-accuracy-drop)", rows)
    if chosen is None:
        best = outcome.best
        chosen = best if best is not None and best.score.drop < first.drop else None
    candidates = ctx.validation["candidates"]
    if chosen is not None:
        metrics, score = scorer.score(chosen.path)
        record_choice(ctx, chosen.path, method, metrics, score, scorer.task, candidates)
        widened = set(chosen.nodes) if chosen.rung in ("fp16", "float") else set()
        ctx.quantization["keep_float"] = sorted(set(config.keep_float) | widened)
        ctx.quantization["mixed_precision"] = {"rung": chosen.rung, "nodes": chosen.nodes}
    else:
        record_choice(ctx, ctx.quant_path, method, first_metrics, first, scorer.task, candidates)
    if outcome.met is None:
        section["accepted_drop"] = ctx.validation["accuracy_drop"]
        ctx.validation["accuracy_budget"]["accepted"] = True
        ctx.warn(f"accuracy drop ACCEPTED (--accept-accuracy-drop): {ctx.validation['accuracy_drop']:.2f} "
                 f"points lost, over the {ctx.profile.name} budget of {budget:g}")
        ctx.report(rows)
    ctx.extra_manifest["accuracy_guard"] = section
    ctx.mark("accuracy_guard", "validation", "quant_path", "quantization", "extra_manifest")
